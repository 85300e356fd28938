package engine

import (
	"encoding/json"
	"errors"
	"testing"
)

// A MessageID read from JSON as an array of numbers (the form before
// MarshalText) takes exactly 16 of them: a shorter array was zero-filled
// and a longer one cut, so a damaged job record loaded as another id. null
// leaves the id as it is, as it does a ReceiptHandle.
func TestMessageIDFromJSONArraysOfSixteenOnly(t *testing.T) {
	for _, in := range []string{`[1,2]`, `[]`, `[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]`} {
		var id MessageID
		if err := json.Unmarshal([]byte(in), &id); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("MessageID from %s: %v, %v; want an *ArgumentError", in, id, err)
		}
	}
	var id MessageID
	if err := json.Unmarshal([]byte(`[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]`), &id); err != nil || id[0] != 1 || id[15] != 16 {
		t.Fatalf("MessageID from 16 numbers: %v, %v", id, err)
	}
	var job struct {
		ID     MessageID
		Handle ReceiptHandle
	}
	job.ID = id
	if err := json.Unmarshal([]byte(`{"ID":null,"Handle":null}`), &job); err != nil || job.ID != id {
		t.Fatalf("null: %v, %v; want the id unchanged", job.ID, err)
	}
}
