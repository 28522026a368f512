package gangstate

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// requeueClaimTTL bounds how long a gang's requeued member stands for the whole gang: if its
// attempt never runs (it was deleted, or is stuck in back-off), the next event requeues
// another member.
const requeueClaimTTL = 30 * time.Second

// ClaimRequeue decides whether a cluster event that can help a gang requeues this member:
// only one member per gang is requeued until its scheduling attempt has run (RequeueDone).
// If the attempt gets the gang going, its Permit activates the other members; if it fails,
// the other members cost nothing. A gang of 600 members waiting for room is thus retried
// once per relevant event, not 600 times.
func (t *Tracker) ClaimRequeue(key Key, uid types.UID, now time.Time) bool {
	t.reg.Lock()
	defer t.reg.Unlock()
	s, d := t.gangLocked(key)
	if s == nil {
		return true
	}
	if s.requeued != "" && s.requeued != uid && now.Sub(s.requeuedAt) < requeueClaimTTL {
		if d.MemberLocked(s.requeued) != nil {
			return false
		}
	}
	s.requeued, s.requeuedAt = uid, now
	return true
}

// RequeueDone says that a member of the gang is being scheduled: the next cluster event may
// requeue a member again.
func (t *Tracker) RequeueDone(key Key) {
	t.reg.RLock()
	s, _ := t.peekLocked(key)
	claimed := s != nil && s.requeued != ""
	t.reg.RUnlock()
	if !claimed {
		return
	}
	t.reg.Lock()
	if s, _ := t.peekLocked(key); s != nil {
		s.requeued = ""
	}
	t.reg.Unlock()
}
