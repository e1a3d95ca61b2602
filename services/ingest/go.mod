module github.com/jetqueue/jetqueue/services/ingest

go 1.26.8
