module github.com/jetqueue/jetqueue/cmd/jqctl

go 1.26.8

require github.com/jetqueue/jetqueue/libs v0.0.0

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)

replace github.com/jetqueue/jetqueue/libs => ../../libs
