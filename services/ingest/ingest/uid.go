package ingest

import (
	"context"
	"slices"

	"github.com/jetqueue/jetqueue/libs/auth"
)

// keepsUID says whether a submission on ctx keeps the metadata.uid it
// was sent. As the API server assigns every object's uid, ingest derives
// one (from the submission's id) for every caller but jetqueue's own
// doors in system:masters: the Job bridge gives a Job's Workload the
// Job's uid, which it finds its Job by. A tenant's uid would otherwise
// be kept as sent: chosen to sort first among preemption victims of the
// same priority and time, or the uid of another namespace's workload.
func keepsUID(ctx context.Context) bool {
	u, ok := auth.UserFrom(ctx)
	return ok && slices.Contains(u.Groups, auth.GroupMasters)
}
