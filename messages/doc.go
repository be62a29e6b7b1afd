// Package messages holds the plain data that lockwarden's actors exchange: commands, replies and
// notices. It has no behaviour and imports nothing of lockwarden, so every other package may use it.
package messages
