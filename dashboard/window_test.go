package dashboard

import "testing"

// TestWindowText: each kind of window in the words the page shows.
func TestWindowText(t *testing.T) {
	for in, want := range map[string]string{
		"daily:America/Los_Angeles": "daily, resets at midnight America/Los_Angeles",
		"monthly:Europe/Paris":      "monthly, resets on the 1st at midnight Europe/Paris",
		"sliding:1h0m0s":            "sliding 1h",
		"weekly:x":                  "weekly:x", // not a window: as stored
	} {
		if got := windowText(in); got != want {
			t.Errorf("windowText(%q) = %q, want %q", in, got, want)
		}
	}
}
