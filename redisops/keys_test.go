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
