module github.com/jetqueue/jetqueue/services/scorer

go 1.26.8
