package rawquery

import "testing"

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		raw, name, want string
		ok              bool
	}{
		{"key=K", "key", "K", true},
		{"a=1&key=K&key=L", "key", "K", true},
		{"%6Bey=K", "key", "K", true}, // an escaped name is the same parameter
		{"k%65y=a%2Bb", "key", "a+b", true},
		{"key=a+b", "key", "a b", true},
		{"key", "key", "", true},
		{"keys=K", "key", "", false},
		{"%zzkey=K", "key", "", false}, // does not unescape: compared as it is
		{"%zz=K", "%zz", "K", true},
		{"", "key", "", false},
	} {
		v, ok := Lookup(tc.raw, tc.name)
		if v != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q, %q) = %q, %v; want %q, %v", tc.raw, tc.name, v, ok, tc.want, tc.ok)
		}
	}
}

func TestHasValue(t *testing.T) {
	for raw, want := range map[string]bool{
		"key=&key=K": true,
		"key=":       false,
		"%6Bey=K":    true,
		"a=key":      false,
	} {
		if got := HasValue(raw, "key"); got != want {
			t.Errorf("HasValue(%q) = %v, want %v", raw, got, want)
		}
	}
}

func FuzzLookup(f *testing.F) {
	f.Add("%6Bey=K&key=L", "key")
	f.Fuzz(func(t *testing.T, raw, name string) {
		v, ok := Lookup(raw, name)
		if !ok && v != "" {
			t.Fatalf("Lookup(%q, %q) = %q without the name", raw, name, v)
		}
		if HasValue(raw, name) && !ok {
			t.Fatalf("HasValue(%q, %q) but Lookup finds nothing", raw, name)
		}
	})
}
