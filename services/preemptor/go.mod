module github.com/jetqueue/jetqueue/services/preemptor

go 1.26.8
