// Package engine is smqd's embeddable broker core: queues, the message state
// machine, striped priority lanes, a hierarchical timing wheel, receipt
// handles, long polling, and compaction of the log that holds the bodies.
//
// A Broker owns its queues (by name), the log store and the clock. A Queue
// owns S stripes, its waiting receives and its attributes. A stripe owns 16
// priority lanes, a bitmap of non-empty lanes, a timing wheel and a slab of
// message slots, all under one mutex. A message lives in exactly one stripe.
//
// # Message states
//
//	from        event                           to          side effects
//	(send)      DelaySeconds > 0                Delayed     wheel: delay end
//	(send)      no delay                        Active      lane push, wheel: expiry
//	Delayed     delay ends                      Active      lane push, wake waiters
//	Active      receive                         Inactive    gen+1, DequeueCount+1, FirstDequeueTime on
//	                                                        the first receive, wheel: visibility end
//	Inactive    visibility timeout ends         Active      lane push (tail), wake waiters; handle dies
//	Inactive    ChangeVisibility(valid handle)  Inactive    gen+1 (old handle dies), new visibility end
//	Inactive    Delete(valid handle)            Deleted     slot freed, live bytes released
//	any         retention ends                  Expired     slot freed, live bytes released
//
// Only Active messages can be received or peeked. Peek changes nothing.
//
// # Invariants
//
//  1. A message is in exactly one stripe; it is in its priority's lane iff it
//     is Active, and in the stripe's wheel iff it is Delayed, Active or
//     Inactive (stripe.go).
//  2. A receipt handle works only while its message is Inactive under the
//     receive or visibility change that issued it, and before its
//     NextVisibleTime; a forged handle never touches state (handle.go).
//  3. MessageIds are never reused within a queue: they carry the queue's
//     broker-unique id and a per-queue sequence number.
//  4. Counts of Active, Inactive and Delayed messages are exact whenever read.
//  5. A short poll never misses a message that is Active at the time of the
//     call: a receive first advances every stripe whose next event is due.
//  6. No lock is held across stripes, across I/O or while sleeping; time comes
//     only from the injected Clock.
//  7. Records about a message reach the log in the order its changes were
//     applied (record.go), so replaying "last record wins" rebuilds it.
//
// Lock order: Broker.adminMu, Broker.mu, stripe.mu, then the log store's own
// locks; waitQueue.mu is taken alone. See docs/locking.md.
package engine
