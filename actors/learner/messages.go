package learner

import "github.com/agentd/agentd/chat"

// Learn hands the learner the person's own words of a fold. Fire and
// forget: the words stay in the log, so a slow learner loses nothing.
type Learn struct {
	ChatID     string
	Tenant     string
	Words      []chat.Message // the person's own messages, in seq order
	ThroughSeq int64          // the fold's last seq
	Model      string         // the chat's model, for learning
	// Factor is the chat's estimate correction (window.Calibration), so a
	// learning request is sized the way the chat's turns are.
	Factor    float64
	Untrusted bool // the chat read outside text: wait for an OK
	NoAuto    bool // remembering automatically is off: wait
	Shared    bool // other people are in the chat: learn nothing
	// Source names what asked: memory.SourceFold (the default when empty)
	// or memory.SourceSweep.
	Source string
}

// Sweep asks for a sweep now (besides the periodic one). Sent with
// RequestFuture, it is answered with *Swept once the sweep has read every
// chat and queued what it found; the learning itself follows.
type Sweep struct{}

// Swept answers Sweep.
type Swept struct {
	// Queued lists the chats the sweep queued for learning.
	Queued []string
	// Busy: a sweep was already running; this one did nothing.
	Busy bool
	// Err says what went wrong reading chats ("" when nothing did).
	Err string
}

// Status asks how busy the learner is; answered with *StatusReply.
type Status struct{}

// StatusReply answers Status.
type StatusReply struct {
	Running  int  // learning runs in flight
	Queued   int  // chats waiting for a run
	Sweeping bool // a sweep is reading chats
}

// Private self-messages.
type (
	learnDone struct{ out Outcome }
	sweepTick struct{}
	sweepDone struct{}
)
