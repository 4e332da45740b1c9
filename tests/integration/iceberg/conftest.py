from __future__ import annotations

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="session")
def s3():
    """The real moto server (``devtools.s3``) checking credentials (IAM keys), with a bucket ``lake``."""
    from devtools.s3 import LocalS3

    (REPO / "test-output").mkdir(exist_ok=True)
    with LocalS3(auth=True, log_path=REPO / "test-output" / "moto.log") as server:
        server.create_bucket("lake")
        yield server


@pytest.fixture(scope="session")
def rest(s3):
    """Apache Iceberg's REST catalog server (``devtools.rest_catalog``) on the S3 warehouse ``s3://lake/rest``,
    behind the OAuth2 gateway that checks its client credential."""
    from devtools.rest_catalog import LocalRESTCatalog

    with LocalRESTCatalog(warehouse="s3://lake/rest", s3=s3, auth=True,
                          log_path=REPO / "test-output" / "iceberg-rest.log") as server:
        yield server
