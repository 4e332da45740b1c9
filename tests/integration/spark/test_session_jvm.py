"""The local JVM ``cdc.spark.session`` starts, checked from inside (HotSpot's own flags), not from the settings we pass."""

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


def test_a_local_jvm_allocates_broadcast_and_task_chunks_below_g1s_humongous_size(spark):
    """G1 allocates an object of half a heap region or more in the old generation, and such allocations start
    concurrent marking cycles: Spark's 4 MB broadcast chunks (one per job) and 1 MB task-serialization chunks, with
    the default 1-2 MB regions, started one every few seconds in a job of 20 small tables (``LOCAL_SPARK_CONF``).
    Both chunk sizes, as the running JVM and SparkContext hold them, must stay below half a region."""
    if vm_option(spark, "UseG1GC") != "true":  # HotSpot picks Serial GC on 1 CPU or under ~1.8 GB: no humongous
        pytest.skip("this JVM does not run G1")
    region = int(vm_option(spark, "G1HeapRegionSize"))
    block = spark.sparkContext._jsc.sc().conf().getSizeAsBytes("spark.broadcast.blockSize", "4m")
    task_chunk = 1 << 20  # SerializerHelper.serializeToChunkedBuffer's fixed estimate
    assert max(block, task_chunk) < region // 2, (block, region)
