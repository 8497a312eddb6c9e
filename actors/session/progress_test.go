package session

import (
	"testing"
	"time"

	"github.com/agentd/agentd/chat"
)

func TestWaitingSaysWhatATurnWaitsForAndSinceWhen(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	now := start.Add(3 * time.Second)
	cases := map[string]struct {
		phase    phase
		lastWord time.Time
		running  []string
		want     chat.Waiting
		ok       bool
	}{
		"a fold":              {phase: phaseFolding, want: chat.Waiting{WaitingFor: chat.WaitingSummary, ElapsedMS: 3000}, ok: true},
		"an in-turn summary":  {phase: phaseCondensing, want: chat.Waiting{WaitingFor: chat.WaitingCompaction, ElapsedMS: 3000}, ok: true},
		"the first word":      {phase: phaseCalling, want: chat.Waiting{WaitingFor: chat.WaitingModel, Detail: "p/m", ElapsedMS: 3000}, ok: true},
		"silence after words": {phase: phaseCalling, lastWord: start.Add(2500 * time.Millisecond), want: chat.Waiting{WaitingFor: chat.WaitingModel, Detail: "p/m", ElapsedMS: 500}, ok: true},
		"a word of an earlier call": {phase: phaseCalling, lastWord: start.Add(-time.Second),
			want: chat.Waiting{WaitingFor: chat.WaitingModel, Detail: "p/m", ElapsedMS: 3000}, ok: true},
		"tools":                  {phase: phaseTools, running: []string{"slow", "pdf_search"}, want: chat.Waiting{WaitingFor: chat.WaitingTools, Detail: "slow, pdf_search", ElapsedMS: 3000}, ok: true},
		"a retry":                {phase: phaseBackoff, want: chat.Waiting{WaitingFor: chat.WaitingRetry, ElapsedMS: 3000}, ok: true},
		"deciding":               {phase: phasePreparing},
		"the application's call": {phase: phasePaused},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tr := &turn{ref: "p/m", running: c.running}
			tr.phase, tr.waitSince = c.phase, start
			if !c.lastWord.IsZero() {
				tr.lastWord.Store(c.lastWord.UnixNano())
			}
			got, ok := tr.waiting(now)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if !ok {
				return
			}
			if got.WaitingFor != c.want.WaitingFor || got.ElapsedMS != c.want.ElapsedMS || (c.want.Detail != "" && got.Detail != c.want.Detail) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			if got.Detail == "" {
				t.Error("no detail for a person")
			}
		})
	}
}
