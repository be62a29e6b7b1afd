// Package messages holds the plain data that lockwarden's actors exchange: commands, replies and
// notices. It has no behaviour and imports nothing of lockwarden, so every other package may use it.
//
// # Actor message API
//
// An application built on protoactor drives locks by message: it sends [Acquire], [Release],
// [ForceUnlock] and [Status] to the PID of a coordinator's gateway (coordinator.Coordinator.PID) with
// Request, and gets the reply as a message: [Acquired] or [NotObtained]; [Released] or [NotHeld];
// [ForceUnlocked]; [StatusReply]; or [Error] for invalid input, a Redis error or a closed coordinator.
// Replies are pointers. The gateway accepts commands as values or pointers.
//
// A command without an Owner is owned by the actor that sent it: the coordinator watches that actor and,
// when it stops (or crashes and its supervisor stops it), releases every hold it has, each lock and each
// re-entry, and drops its waits. Such a release is logged with the cause [ReleaseCauseOwnerStopped].
// A command with an explicit Owner is not tied to the sender: any actor may use that owner id.
package messages
