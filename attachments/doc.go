// Package attachments stores the files people attach to a chat and lets the
// model read them on demand. A file is stored once, content-addressed by its
// sha256, outside the transcript; the message carries only a compact note of
// real facts (name, type, size, a PDF's page count, a text file's line count,
// a spreadsheet's sheets and their sizes, a document's words and headings,
// an image's dimensions) that names the tools to read it with. No attachment
// content is ever put into a request by itself: the model pulls line ranges,
// page ranges, cell ranges, paragraphs, search hits or pixels through the
// tools RegisterTools adds. Text extracted from a PDF, a sheet or a document
// is kept in a unit index beside the file, so it is extracted once.
//
// Ownership: a Store is safe for concurrent use by any number of goroutines;
// it owns the files under its directory and nothing else. Put and PutPath
// return only once the file, its facts and its index are durable on disk. Each tool call
// opens and closes its own file handle, so there is nothing to Close. Sweep deletes the
// files its caller says nobody holds; the store keeps no record of holds.
package attachments
