"""The local JVM ``cdc.session`` starts, checked from inside (HotSpot's own flags), not from the settings we pass."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def vm_option(spark, name: str) -> str:
    jvm = spark.sparkContext._jvm
    bean_class = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    return jvm.java.lang.management.ManagementFactory.getPlatformMXBean(bean_class).getVMOption(name).getValue()


def test_a_local_jvm_compiles_with_c1_and_keeps_the_full_code_cache(spark):
    """C1-only compilation (``LOCAL_DRIVER_JAVA_OPTIONS``) makes HotSpot shrink its code cache from 240 to 48 MB. A
    job of 20 tables filled it: "Out of space in CodeCache for method handle intrinsic" killed Spark's listener
    thread, the SparkContext stopped and every table still running failed ("Cannot call methods on a stopped
    SparkContext"). The local JVM must keep C1 and the full code cache."""
    assert vm_option(spark, "TieredStopAtLevel") == "1"
    assert int(vm_option(spark, "ReservedCodeCacheSize")) >= 240 << 20
