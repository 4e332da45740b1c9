"""REST catalog and object-store failures named like the JDBC catalog's (cdc.iceberg.failures): unreachable → 75,
refused → 2. The texts are the Java errors the job saw from the real Iceberg REST server and moto."""

from __future__ import annotations

from cdc.common.errors import CatalogError, CatalogUnavailable
from cdc.iceberg.failures import classify

REST_DOWN = ("py4j.protocol.Py4JJavaError: An error occurred while calling o52.sql.\n"
             ": org.apache.iceberg.exceptions.RESTException: Error occurred while processing GET request\n"
             "\tat org.apache.iceberg.rest.HTTPClient.execute(HTTPClient.java:300)\n"
             "Caused by: org.apache.iceberg.shaded.org.apache.hc.client5.http.HttpHostConnectException: Connect to "
             "http://127.0.0.1:35491 failed: Connection refused\n")
REST_503 = ": org.apache.iceberg.exceptions.ServiceUnavailableException: Service unavailable: catalog server down\n"
REST_401 = (": org.apache.iceberg.exceptions.NotAuthorizedException: Not authorized: invalid_client: bad client "
            "credentials\n\tat org.apache.iceberg.rest.ErrorHandlers$OAuthErrorHandler.accept(ErrorHandlers.java:1)\n")
S3_403 = (": software.amazon.awssdk.services.s3.model.S3Exception: FORBIDDEN (Service: S3, Status Code: 403, "
          "Request ID: x)\n\tat org.apache.iceberg.rest.RESTSessionCatalog.loadTable(RESTSessionCatalog.java:1)\n")
S3_DOWN = (": software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request: Connect to "
           "127.0.0.1:40000 [/127.0.0.1] failed: Connection refused\n")


def test_rest_catalog_unreachable_is_retryable() -> None:
    for text in (REST_DOWN, REST_503):
        err = classify(text, "table a.b: plan failed")
        assert isinstance(err, CatalogUnavailable) and err.exit_code == 75, (text, err)
        assert str(err).startswith("table a.b: plan failed: the rest catalog is unreachable")
    assert "HttpHostConnectException: Connect to http://127.0.0.1:35491 failed" in str(classify(REST_DOWN, "x"))


def test_rest_credentials_refused_is_terminal() -> None:
    err = classify(REST_401, "ctx")
    assert isinstance(err, CatalogError) and err.exit_code == 2
    assert "invalid_client" in str(err) and "credential" in str(err)


def test_object_store_refusal_and_outage() -> None:
    refused = classify(S3_403, "ctx")  # S3 errors win over the REST frames of the stack
    assert isinstance(refused, CatalogError) and "object storage refused" in str(refused)
    assert "Status Code: 403" in str(refused) and "AWS_SECRET_ACCESS_KEY" in str(refused)
    down = classify(S3_DOWN, "ctx")
    assert isinstance(down, CatalogUnavailable) and "object storage is unreachable" in str(down)


def test_other_errors_stay_unclassified() -> None:
    assert classify("java.lang.IllegalStateException: boom", "ctx") is None
