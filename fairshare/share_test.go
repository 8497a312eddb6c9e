package fairshare

import (
	"fmt"
	"strings"
	"testing"
)

// TestShare drives the slot policy step by step. A step is
// "ask T" (want "slot" or "wait"), "release T" (want the tickets granted,
// as "T#ticket" joined by spaces, or "") or "cancel T#ticket" (want
// "waiting" or "held"). Tickets count from 1 in the order asked.
func TestShare(t *testing.T) {
	type step struct{ do, want string }
	for name, tc := range map[string]struct {
		size, perTenant int
		steps           []step
	}{
		"one tenant stops at its cap with a slot free": {4, 3, []step{
			{"ask b", "slot"}, {"ask b", "slot"}, {"ask b", "slot"}, {"ask b", "wait"},
			// The free slot is kept for another tenant, not given to b.
			{"ask a", "slot"},
			{"release b", "b#4"},
		}},
		"a freed slot goes to the tenant holding fewest, not the oldest request": {4, 4, []step{
			{"ask b", "slot"}, {"ask b", "slot"}, {"ask b", "slot"}, {"ask b", "slot"},
			{"ask b", "wait"}, {"ask b", "wait"}, {"ask b", "wait"}, {"ask b", "wait"},
			{"ask a", "wait"},
			{"release b", "a#9"},
			{"release b", "b#5"},
			{"release a", "b#6"},
		}},
		"among tenants holding as many, the one waiting longest": {2, 2, []step{
			{"ask b", "slot"}, {"ask b", "slot"}, {"ask b", "wait"},
			{"ask c", "wait"}, {"ask a", "wait"},
			{"release b", "c#4"}, // b holds 1, c and a none: c asked before a
			{"release b", "a#5"}, // b and a hold none: a was never served, b just was
			{"release c", "b#3"},
		}},
		"a tenant is served in the order it asked": {1, 1, []step{
			{"ask b", "slot"}, {"ask b", "wait"}, {"ask b", "wait"}, {"ask b", "wait"},
			{"release b", "b#2"}, {"release b", "b#3"}, {"release b", "b#4"}, {"release b", ""},
		}},
		"a cancelled waiter leaves its place": {1, 1, []step{
			{"ask b", "slot"}, {"ask b", "wait"}, {"ask b", "wait"}, {"ask a", "wait"},
			{"cancel b#2", "waiting"}, {"cancel b#3", "waiting"},
			{"release b", "a#4"},
			{"release a", ""},
		}},
		"a waiter granted before it cancels holds its slot": {1, 1, []step{
			{"ask b", "slot"}, {"ask a", "wait"},
			{"release b", "a#2"},
			{"cancel a#2", "held"},
			{"release a", ""},
		}},
		"a release of nothing held frees nothing": {1, 1, []step{
			{"release b", ""},
			{"ask a", "slot"},
			{"release b", ""},
			{"ask b", "wait"},
			{"release a", "b#2"},
			{"release b", ""}, {"release b", ""},
			{"ask a", "slot"}, {"ask c", "wait"},
		}},
		"a cap above the size is the size": {2, 5, []step{
			{"ask b", "slot"}, {"ask b", "slot"}, {"ask b", "wait"},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			f := New(tc.size, tc.perTenant)
			for i, s := range tc.steps {
				verb, arg, _ := strings.Cut(s.do, " ")
				var got string
				switch verb {
				case "ask":
					if _, ok := f.Ask(arg); ok {
						got = "slot"
					} else {
						got = "wait"
					}
				case "release":
					var gs []string
					for _, g := range f.Release(arg) {
						gs = append(gs, fmt.Sprintf("%s#%d", g.Tenant, g.Ticket))
					}
					got = strings.Join(gs, " ")
				case "cancel":
					var tenant string
					var ticket uint64
					if _, err := fmt.Sscanf(strings.Replace(arg, "#", " ", 1), "%s %d", &tenant, &ticket); err != nil {
						t.Fatalf("step %d %q: %v", i, s.do, err)
					}
					got = "held"
					if f.Cancel(tenant, ticket) {
						got = "waiting"
					}
				default:
					t.Fatalf("step %d: unknown %q", i, s.do)
				}
				if got != s.want {
					t.Fatalf("step %d %q = %q, want %q", i, s.do, got, s.want)
				}
				checkShare(t, f)
			}
		})
	}
}

// checkShare checks what must hold after every step: the counts agree and
// stay in bounds, no free slot is left while a tenant that may take one
// waits, and no tenant without slots or tickets keeps an entry.
func checkShare(t *testing.T, f *Share) {
	t.Helper()
	sum := 0
	for n, ts := range f.tenants {
		if ts.held < 0 || ts.held > f.perTenant || (ts.held == 0 && len(ts.waiting) == 0) {
			t.Fatalf("tenant %s: %d held, %d waiting (cap %d)", n, ts.held, len(ts.waiting), f.perTenant)
		}
		if f.held < f.size && len(ts.waiting) > 0 && ts.held < f.perTenant {
			t.Fatalf("tenant %s waits with a slot free (%d of %d held)", n, f.held, f.size)
		}
		sum += ts.held
	}
	if sum != f.held || f.held < 0 || f.held > f.size {
		t.Fatalf("%d held in all, %d by the tenants, size %d", f.held, sum, f.size)
	}
}
