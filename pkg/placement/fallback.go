package placement

import (
	"errors"

	"github.com/hypernode-dev/hypernode-scheduler/pkg/podgroup"
)

// Fallback continues after Make(req) failed with err, as the scheduler does for a job that
// can run with fewer members than it has: a job with sub-groups is planned without those it
// can do without (RetryWithoutSubGroups); an elastic gang (more members than minMember) with
// the most members, in rank order, that fit. placed counts the job's bound and reserved
// members. It returns the plan, the request it was made from, and the pending members left
// out to wait for room; with no plan, the request and the error that explain the job.
func Fallback(req Request, err error, info podgroup.Info, states []podgroup.SubGroupState, placed int) (*Plan, Request, []string, error) {
	var plan *Plan
	var deferred []string
	if err != nil && len(req.SubGroups) > 0 {
		var retried *Plan
		if retried, req, deferred, err = RetryWithoutSubGroups(req, err, info, states); err == nil {
			plan = retried
		}
	}
	if unsat := (*Unsatisfiable)(nil); errors.As(err, &unsat) && len(req.SubGroups) == 0 {
		if partial, kept, partialErr := elastic(req, info.MinMember()-placed); partial != nil {
			plan, err = partial, nil
			deferred = append(deferred, req.Pending[kept:]...)
			req = withPending(req, req.Pending[:kept])
		} else if partialErr != nil {
			err = partialErr
		}
	}
	return plan, req, deferred, err
}

// elastic plans the most members, in rank order, that fit when not all pending ones do: at
// least need (the members minMember still lacks, at least one) and fewer than all. It returns
// the plan and how many members it holds; or no plan and, when even need members do not fit,
// the error that says so (it names the gang's real minimum); or neither when the gang is not
// elastic.
func elastic(req Request, need int) (*Plan, int, error) {
	need = max(need, 1)
	if need >= len(req.Pending) {
		return nil, 0, nil
	}
	best, err := Make(withPending(req, req.Pending[:need]))
	if err != nil {
		return nil, 0, err
	}
	// Fitting is monotone in the number of members (fewer members never need more room):
	// search for the largest count that fits.
	kept, lo, hi := need, need+1, len(req.Pending)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		if plan, err := Make(withPending(req, req.Pending[:mid])); err == nil {
			best, kept, lo = plan, mid, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best, kept, nil
}

// withPending returns req with only the given pending members and no sub-groups.
func withPending(req Request, pending []string) Request {
	req.Pending = pending
	req.SubGroups = nil
	return req
}
