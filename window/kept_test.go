package window

import (
	"testing"

	"pgregory.net/rapid"
)

// TestKeptTotalsAreAFullRecount: whatever messages come and fold away, in
// whatever steps, the totals Kept moves equal estimating every kept message
// afresh, and its messages are the chat's from the fold on.
func TestKeptTotalsAreAFullRecount(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		chat := genChat(rt)
		var k Kept
		next := 0
		for next < len(chat) {
			switch rapid.IntRange(0, 3).Draw(rt, "step") {
			case 0: // fold up to a seq among the kept (or past them all)
				if kept := k.Msgs(); len(kept) > 0 {
					k.DropBefore(kept[rapid.IntRange(0, len(kept)-1).Draw(rt, "fold")].Seq + rapid.Int64Range(0, 1).Draw(rt, "past"))
				}
			default: // some messages come
				n := rapid.IntRange(1, len(chat)-next).Draw(rt, "come")
				k.Append(chat[next : next+n]...)
				next += n
			}
			fresh := make([]Msg, len(k.Msgs()))
			for i, m := range k.Msgs() {
				m.Tokens, m.Conservative = 0, 0
				fresh[i] = m
			}
			if got, want := k.Tokens(), EstimateMsgs(fresh); got != want {
				rt.Fatalf("kept tokens %d; a recount says %d", got, want)
			}
			if got, want := k.Conservative(), ConservativeTokens(fresh); got != want {
				rt.Fatalf("kept conservative %d; a recount says %d", got, want)
			}
			if got, want := ConservativeTokens(k.Msgs()), k.Conservative(); got != want {
				rt.Fatalf("the cached conservative counts sum to %d, not %d", got, want)
			}
			if kept := k.Msgs(); len(kept) > 0 && (kept[len(kept)-1].Seq != chat[next-1].Seq) {
				rt.Fatalf("the newest kept message is seq %d, not %d", kept[len(kept)-1].Seq, chat[next-1].Seq)
			}
		}
	})
}
