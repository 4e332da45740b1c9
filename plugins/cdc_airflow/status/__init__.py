"""The "CDC status" view: its data and HTML (``view``) and the authenticated FastAPI app the Airflow API server
mounts at ``/cdc-status`` (``app``, registered by ``plugins/cdc_status_plugin.py``)."""
