package server

import "testing"

// Dead-letter audit (2026-12-07): no SDK sends a dead-letter policy, and
// applications commonly call CreateQueue with their attributes at every
// start (201 new, 204 same). Once an operator gives the queue a policy
// (smqctl queue set --dead-letter-queue), the application's unchanged
// CreateQueue must still be 204, not 409 QueueAlreadyExist; a create that
// names another policy is still 409.
func TestCreateQueueWithoutPolicyElementsKeepsThePolicy(t *testing.T) {
	env := startEnv(t, envConfig{})
	c := env.client()
	c.mustCreate("dlq")
	app := `<Queue><VisibilityTimeout>10</VisibilityTimeout></Queue>`
	wantStatus(t, c.put("/queues/src", app), 201)
	wantStatus(t, c.put("/queues/src?metaoverride=true", `<Queue><DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>3</MaxReceiveCount></Queue>`), 204)
	wantStatus(t, c.put("/queues/src", app), 204)
	wantError(t, c.put("/queues/src", `<Queue><VisibilityTimeout>10</VisibilityTimeout><DeadLetterTargetQueue>dlq</DeadLetterTargetQueue><MaxReceiveCount>4</MaxReceiveCount></Queue>`), 409, "QueueAlreadyExist")
	wantError(t, c.put("/queues/src", `<Queue><VisibilityTimeout>10</VisibilityTimeout><DeadLetterTargetQueue></DeadLetterTargetQueue></Queue>`), 409, "QueueAlreadyExist")
	var q xQueueDLQ
	decode(t, c.get("/queues/src"), &q)
	if q.DeadLetterTargetQueue != "dlq" || q.MaxReceiveCount != 3 {
		t.Fatalf("policy after the creates: %+v", q)
	}
}
