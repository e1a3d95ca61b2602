module github.com/jetqueue/jetqueue/services/podsready

go 1.26.8
