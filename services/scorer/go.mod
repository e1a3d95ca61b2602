module github.com/jetqueue/jetqueue/services/scorer

go 1.26.8

require github.com/jetqueue/jetqueue/libs v0.0.0

require k8s.io/client-go v0.37.2 // indirect

replace github.com/jetqueue/jetqueue/libs => ../../libs
