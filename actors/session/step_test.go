package session

import (
	"testing"

	"github.com/agentd/agentd/chat"
)

func TestNextBeforeACall(t *testing.T) {
	cases := map[string]struct {
		ts   turnState
		f    facts
		want step
	}{
		"a request that fits calls":                      {turnState{}, facts{}, stepCall},
		"a request that does not fit folds":              {turnState{}, facts{foldTo: 7, lean: true, canPreload: true, condense: true}, stepFold},
		"a fold in flight is waited for":                 {turnState{}, facts{foldTo: 7, fold: foldRunning}, stepAwaitFold},
		"a fold that moved its boundary is not awaited":  {turnState{}, facts{foldTo: 7, fold: foldApplied, lean: true, canPreload: true, condense: true}, stepCall},
		"a fold in flight that is not needed is ignored": {turnState{}, facts{fold: foldRunning}, stepCall},
		"lean preloads the named tools once":             {turnState{}, facts{lean: true, canPreload: true, condense: true}, stepPreload},
		"lean without a tool index calls":                {turnState{}, facts{lean: true}, stepCall},
		"preloaded lean calls":                           {turnState{preloaded: true}, facts{lean: true, canPreload: true}, stepCall},
		"a monster turn condenses before the call":       {turnState{preloaded: true}, facts{lean: true, canPreload: true, condense: true}, stepCondense},
		"a full window condenses":                        {turnState{}, facts{condense: true}, stepCondense},
		"after a fold the turn prepares as new":          {turnState{phase: phaseFolding}, facts{lean: true, canPreload: true}, stepPreload},
		"after a retry the turn calls":                   {turnState{phase: phaseBackoff, preloaded: true, rounds: 3}, facts{lean: true, canPreload: true}, stepCall},
		"a healed turn folds what the heal needs":        {turnState{heal: healingHarder}, facts{foldTo: 3}, stepFold},
		"unanswered application calls pause":             {turnState{phase: phaseTools, awaiting: oneCall}, facts{foldTo: 3, lean: true, canPreload: true}, stepPause},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := next(c.ts, c.f); got != c.want {
				t.Fatalf("next(%+v, %+v) = %s, want %s", c.ts, c.f, got, c.want)
			}
		})
	}
}

var oneCall = []chat.ToolCall{{ID: "c1", Name: "crm_lookup"}}

func TestNextAfterTheModelReplied(t *testing.T) {
	calling := turnState{phase: phaseCalling, rounds: 1}
	cases := map[string]struct {
		ts   turnState
		f    facts
		want step
	}{
		"an answer finishes":                     {calling, facts{}, stepFinish},
		"tool calls run":                         {calling, facts{calls: 2}, stepRunTools},
		"agentd runs its calls before the pause": {turnState{phase: phaseCalling, awaiting: oneCall}, facts{calls: 2}, stepRunTools},
		"calls the application runs pause":       {turnState{phase: phaseCalling, awaiting: oneCall}, facts{calls: 1}, stepPause},
		"too many rounds stop the turn":          {turnState{phase: phaseCalling, rounds: maxToolRounds}, facts{calls: 1}, stepTooManyRounds},
		"too many rounds stop a client call too": {turnState{phase: phaseCalling, rounds: maxToolRounds, awaiting: oneCall}, facts{calls: 1}, stepTooManyRounds},
		"the last round may still call":          {turnState{phase: phaseCalling, rounds: maxToolRounds - 1}, facts{calls: 1}, stepRunTools},
		"an answer cut by its room continues":    {calling, facts{lengthStop: true}, stepContinue},
		"a cut answer in a full window finishes": {calling, facts{lengthStop: true, contextFull: true}, stepFinish},
		"continuations are bounded":              {turnState{phase: phaseCalling, continues: maxContinues}, facts{lengthStop: true}, stepFinish},
		"tool calls win over a length stop":      {calling, facts{calls: 1, lengthStop: true}, stepRunTools},
		"a cut at the chat's own cap finishes":   {calling, facts{lengthStop: true, capped: true}, stepFinish},
		"a capped answer that ended finishes":    {calling, facts{capped: true}, stepFinish},
		"tool calls win over a capped cut":       {calling, facts{calls: 1, lengthStop: true, capped: true}, stepRunTools},
		"a call cut at the cap finishes":         {calling, facts{calls: 1, lengthStop: true, capped: true, cutCall: true}, stepFinish},
		"a refused answer's call finishes":       {calling, facts{calls: 1, refused: true}, stepFinish},
		"a second cut call ends the turn":        {turnState{phase: phaseCalling, rounds: 2, cutCalls: 1}, facts{calls: 1, lengthStop: true, cutCall: true}, stepCutAgain},
		"a whole call after a cut one runs":      {turnState{phase: phaseCalling, rounds: 2, cutCalls: 1}, facts{calls: 1}, stepRunTools},
		"a client call cut at the cap finishes":  {turnState{phase: phaseCalling, awaiting: oneCall}, facts{calls: 1, lengthStop: true, capped: true, cutCall: true}, stepFinish},
		"a call cut by agentd's room runs":       {calling, facts{calls: 1, lengthStop: true, cutCall: true}, stepRunTools},
		"plan facts do not matter after a call":  {calling, facts{foldTo: 9, condense: true, lean: true, canPreload: true}, stepFinish},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := next(c.ts, c.f); got != c.want {
				t.Fatalf("next(%+v, %+v) = %s, want %s", c.ts, c.f, got, c.want)
			}
		})
	}
}

func TestHealingHealsOnceAndRemembersHowHard(t *testing.T) {
	cases := map[healing]struct{ healed, harder, pending bool }{
		notHealed:     {false, false, false},
		healingRoom:   {true, false, true},
		healingHarder: {true, true, true},
		healedRoom:    {true, false, false},
		healedHarder:  {true, true, false},
	}
	for h, want := range cases {
		if h.healed() != want.healed || h.harder() != want.harder || h.pending() != want.pending {
			t.Errorf("healing %d: healed %v harder %v pending %v, want %+v", h, h.healed(), h.harder(), h.pending(), want)
		}
		if a := h.answered(); a.pending() || a.harder() != h.harder() || a.healed() != h.healed() {
			t.Errorf("healing %d answered = %d: still pending or lost how hard", h, a)
		}
	}
}
