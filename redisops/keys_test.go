package redisops

import (
	"testing"
	"time"
)

func TestPrefixed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix, name, want string
	}{
		{"p", "orders", "p:{orders}"},
		{"p", "a{b}c", "p:a{b}c"},
		{"p", "{orders}", "p:{orders}"},
		{"p", "", "p:{}"},
		{"redisson_lock__channel", "x:y", "redisson_lock__channel:{x:y}"},
	}
	for _, tt := range tests {
		if got := prefixed(tt.prefix, tt.name); got != tt.want {
			t.Errorf("prefixed(%q, %q): got %q, want %q", tt.prefix, tt.name, got, tt.want)
		}
	}
}

func TestTTLFromMillis(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ms   int64
		want time.Duration
	}{
		{-2, time.Duration(-2)},
		{-1, time.Duration(-1)},
		{0, 0},
		{1, time.Millisecond},
		{30000, 30 * time.Second},
	}
	for _, tt := range tests {
		if got := ttlFromMillis(tt.ms); got != tt.want {
			t.Errorf("ttlFromMillis(%d): got %v, want %v", tt.ms, got, tt.want)
		}
	}
}

// TestNamesOf checks that the keys NamesOf builds in one allocation are the ones the key functions
// build one by one.
func TestNamesOf(t *testing.T) { // not parallel: AllocsPerRun
	for _, name := range []string{"orders", "a{b}c", "{orders}", "", "x:y", "é{"} {
		n := NamesOf(name)
		if n.Name != name || n.Token != TokenKey(name) || n.Channel != ChannelName(name) ||
			n.latchKey("r1") != UnlockLatchKey(name, "r1") {
			t.Errorf("NamesOf(%q): got %q %q %q %q, want %q %q %q %q", name, n.Name, n.Token, n.Channel,
				n.latchKey("r1"), name, TokenKey(name), ChannelName(name), UnlockLatchKey(name, "r1"))
		}
		if n.name != any(n.Name) || n.token != any(n.Token) || n.channel != any(n.Channel) {
			t.Errorf("NamesOf(%q): the boxed keys differ from the keys", name)
		}
	}
	if got := testing.AllocsPerRun(100, func() { _ = NamesOf("orders") }); got > 4 {
		t.Errorf("NamesOf: %v allocations, want at most 4 (the keys' string, and the three boxed)", got)
	}
}
