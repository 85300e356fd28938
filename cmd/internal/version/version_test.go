package version

import "testing"

// A binary Go stamped no revision into (go test here; a build in a git
// worktree) takes the one make build passes with -X.
func TestGetFallsBackToTheStampedRevision(t *testing.T) {
	if Get().Revision != "" {
		t.Skip("this test binary carries a revision of its own")
	}
	gitRevision, gitTime, gitModified = "0123456789abcdef0123", "2026-12-06T00:00:00Z", "true"
	defer func() { gitRevision, gitTime, gitModified = "", "", "" }()
	in := Get()
	if in.Revision != "0123456789abcdef0123" || in.Time != "2026-12-06T00:00:00Z" || !in.Modified || in.Short() != "0123456789ab+changes" {
		t.Fatalf("%+v", in)
	}
}
