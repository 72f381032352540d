"""Several replicas behind nginx on one database: the nginx configuration (`nginx`) and
`python -m app.cluster` (`make cluster`), which runs a whole cluster on one machine."""
