// Package preemptor will hold the preemptor service (issue 7): it will
// consume PreemptionRequested and publish the victims' evictions. Until
// then the admission service evicts the victims it chooses itself.
package preemptor
