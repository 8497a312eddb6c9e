// Package session holds the chat actors: one session actor per chat, and
// the registry actor that is their parent.
//
// Where a message goes:
//
//	HTTP handler ──RequestFuture(Envelope{ChatID, Msg})──▶ registry
//	registry ──(spawns or wakes the chat's actor; forwards, keeping the sender)──▶ session
//	session ──Fold──▶ summarizer ──Folded──▶ session
//	session ──Learn (fire and forget)──▶ learner
//	session's model and tool goroutines ──modelDone / toolsDone──▶ session
//	session ──events──▶ eventbus ──▶ HTTP streams, web console
//
// A session actor is a state machine over one chat: idle, or running one
// turn (preparing, awaiting the model, running tools, awaiting a fold).
// Turns of one chat run strictly in order; a second message waits in the
// actor's queue and is stored when its turn starts, so the log never
// interleaves two turns. Model and tool calls run in goroutines the actor
// owns (cancelled on Stopping) and come back as messages, so reads of the
// chat are answered while a turn streams. Badger writes are done inline:
// they are short, local, and inline keeps the log's order trivially right.
//
// Passivation is a handshake (STYLE.md lesson 20): an idle session tells the
// registry, which poisons it and buffers that chat's messages until
// Terminated arrives, then respawns it if anything is waiting.
package session
