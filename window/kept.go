package window

// Kept is a chat's unfolded messages as the arithmetic reads them. Each
// message is estimated once, when it comes, and the totals move as
// messages come and fold away: a long chat is planned on every model call,
// and re-estimating what it already holds would make each call cost as
// much as the whole chat.
type Kept struct {
	msgs                 []Msg
	tokens, conservative int
}

// Append adds messages at the end, estimating any whose estimates are not
// cached yet.
func (k *Kept) Append(ms ...Msg) {
	for _, m := range ms {
		if m.Tokens <= 0 {
			m.Tokens = EstimateMsg(m)
		}
		if m.Conservative <= 0 {
			m.Conservative = conservative(&m)
		}
		k.tokens += m.Tokens
		k.conservative += m.Conservative
		k.msgs = append(k.msgs, m)
	}
}

// DropBefore folds away the messages before seq.
func (k *Kept) DropBefore(seq int64) {
	n := 0
	for ; n < len(k.msgs) && k.msgs[n].Seq < seq; n++ {
		k.tokens -= k.msgs[n].Tokens
		k.conservative -= k.msgs[n].Conservative
	}
	if n > 0 {
		// A new array: the folded messages' texts are freed with it.
		k.msgs = append([]Msg(nil), k.msgs[n:]...)
	}
}

// Msgs are the kept messages with their estimates cached; read-only.
func (k *Kept) Msgs() []Msg { return k.msgs }

// Tokens is EstimateMsgs of the kept messages.
func (k *Kept) Tokens() int { return k.tokens }

// Conservative is ConservativeTokens of the kept messages.
func (k *Kept) Conservative() int { return k.conservative }
