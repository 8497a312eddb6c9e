// Package toolsearch ranks tools for a request in words. It is pure: no I/O,
// no clock, and no goroutine outlives the call that starts it (a large Add
// cuts its docs' words out over every processor and waits for them).
//
// An Index holds tools (name, description, parameters) and answers two
// questions for a lean chat (seed 0086 §2):
//
//   - Search: which k tools best fit "what the model says it wants to do"?
//     BM25F over four fields (name words, description, parameter names and
//     descriptions, adjacent word pairs), with Porter stemming, everyday
//     synonyms at a lower weight, "an address means the web", a rerank by how
//     much of a tool's name the request covers, and a merge of per-ask
//     rankings for requests that ask for several things.
//   - NamedIn: which tools does a person's message name by a word of their
//     own name ("remember", "browser", an address), to load before the model
//     is asked?
//
// Changes cost what they change: postings keep term counts, and BM25F is
// weighed at search time from the statistics of that moment, so Add and
// Remove write only the tools' own postings, and an index changed one tool
// at a time ranks exactly as one built at once.
//
// Concurrency: Search and NamedIn may run concurrently (a term's weights,
// computed by the first search that reads it after a change, are cached
// atomically); Add and Remove mutate and must not overlap with anything. The tool-index actor
// (actors/toolindex) owns one Index and serializes both.
package toolsearch
