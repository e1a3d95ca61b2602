module github.com/jetqueue/jetqueue/services/admission

go 1.26.8
