package engine

import (
	"errors"
	"fmt"
)

// Errors returned by the engine. Each is named after the MNS error code it
// becomes on the wire; server/errors.go holds the one table that maps them.
var (
	// ErrQueueNotExist: the named queue does not exist (or was deleted while
	// the call was waiting).
	ErrQueueNotExist = errors.New("engine: queue does not exist")
	// ErrQueueAlreadyExist: CreateQueue on a name that exists with other attributes.
	ErrQueueAlreadyExist = errors.New("engine: queue already exists with different attributes")
	// ErrMessageNotExist: nothing to receive or peek, or a receipt handle that is
	// stale, already used, past its NextVisibleTime, or whose message is gone.
	ErrMessageNotExist = errors.New("engine: message does not exist")
	// ErrReceiptHandleError: a receipt handle that this queue never issued
	// (unparsable, or failing its keyed check).
	ErrReceiptHandleError = errors.New("engine: receipt handle is not valid")
	// ErrInvalidArgument: a value out of range or of the wrong shape. The
	// concrete error is an *ArgumentError naming the field and its bounds.
	ErrInvalidArgument = errors.New("engine: invalid argument")
	// ErrInvalidQueueName: a queue name with a character outside [A-Za-z0-9-]
	// or not starting with a letter or digit.
	ErrInvalidQueueName = errors.New("engine: invalid queue name")
	// ErrQueueNameLength: a queue name shorter than 1 or longer than 256 bytes.
	ErrQueueNameLength = errors.New("engine: queue name length out of range")
	// ErrTooManyLongPolls: the broker already holds Options.MaxLongPolls waiting
	// receives; the spec answers this overload with MessageNotExist. It is
	// not ErrMessageNotExist under errors.Is: a caller that polls again on
	// "nothing yet" should treat it so too, after a pause.
	ErrTooManyLongPolls = errors.New("engine: too many outstanding long polls")
	// ErrLocked: the data directory is in use by another broker.
	ErrLocked = errors.New("engine: data directory locked")
	// ErrClosed: the broker is closed (or closing). A send, delete or
	// visibility change in flight when Close began may answer ErrClosed
	// and still be in the log, and so done after the next Open: its
	// outcome is unknown, as a timed-out client call's.
	ErrClosed = errors.New("engine: broker closed")
	// ErrDiskFull: free space on the data directory's file system is below
	// the reserve (Options.FreeSpaceReserve): new messages and queues are
	// refused until space is freed; receives, deletes and visibility
	// changes go on, so that consumers can drain. Retryable.
	ErrDiskFull = errors.New("engine: disk full: new messages are refused until space is freed")
	// ErrStorageUnavailable: the storage cannot take this change now but may
	// later without a restart (a new log segment file cannot be made yet).
	// Retryable.
	ErrStorageUnavailable = errors.New("engine: storage temporarily unavailable")

	// ErrTopicNotExist: the named topic does not exist.
	ErrTopicNotExist = errors.New("engine: topic does not exist")
	// ErrTopicAlreadyExist: CreateTopic on a name that exists with other attributes.
	ErrTopicAlreadyExist = errors.New("engine: topic already exists with different attributes")
	// ErrInvalidTopicName: a topic name with a character outside [A-Za-z0-9-]
	// or not starting with a letter or digit.
	ErrInvalidTopicName = errors.New("engine: invalid topic name")
	// ErrTopicNameLength: a topic name shorter than 1 or longer than 256 bytes.
	ErrTopicNameLength = errors.New("engine: topic name length out of range")
	// ErrSubscriptionNotExist: the named subscription does not exist.
	ErrSubscriptionNotExist = errors.New("engine: subscription does not exist")
	// ErrSubscriptionAlreadyExist: Subscribe on a name that exists with other
	// attributes.
	ErrSubscriptionAlreadyExist = errors.New("engine: subscription already exists with different attributes")
	// ErrInvalidSubscriptionName: a subscription name with a character
	// outside [A-Za-z0-9-] or not starting with a letter or digit.
	ErrInvalidSubscriptionName = errors.New("engine: invalid subscription name")
	// ErrSubscriptionNameLength: a subscription name shorter than 1 or longer
	// than 256 bytes.
	ErrSubscriptionNameLength = errors.New("engine: subscription name length out of range")
	// ErrEndpointInvalid: a subscription endpoint of no known form, a queue
	// endpoint whose queue is missing or too small, or an HTTP endpoint
	// outside PushOptions.Allow. (Mail, SMS and mobile push endpoints are
	// accepted and never delivered to.) The concrete error is an
	// *EndpointError.
	ErrEndpointInvalid = errors.New("engine: invalid subscription endpoint")
)

// EndpointError says why a subscription endpoint is refused. It matches
// ErrEndpointInvalid with errors.Is.
type EndpointError struct {
	Endpoint string
	Msg      string
}

func (e *EndpointError) Error() string {
	return fmt.Sprintf("engine: invalid subscription endpoint %q: %s", e.Endpoint, e.Msg)
}

// Is reports whether target is ErrEndpointInvalid.
func (e *EndpointError) Is(target error) bool { return target == ErrEndpointInvalid }

// ArgumentError describes an invalid argument. It matches ErrInvalidArgument
// with errors.Is.
type ArgumentError struct {
	Field string // the API element, e.g. "VisibilityTimeout"
	Msg   string // what is wrong, e.g. "must be between 1 and 43200 seconds"
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("engine: invalid argument: %s %s", e.Field, e.Msg)
}

// Is reports whether target is ErrInvalidArgument.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

func argErr(field, format string, args ...any) error {
	return &ArgumentError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// rangeErr builds the range message the service uses: the element, its lower
// and upper bound and the unit.
func rangeErr(field string, min, max int64, unit string) error {
	if unit == "" {
		return argErr(field, "must be between %d and %d", min, max)
	}
	return argErr(field, "must be between %d and %d %s", min, max, unit)
}
