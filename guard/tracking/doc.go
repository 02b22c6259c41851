// Package tracking keeps what the guard follows between requests: which
// inodes are guarded and which record names each guarded path's current
// version (Index); which paths the guard is changing now and what it last
// gave them (Changes); what each reader read (Reads); who holds each inode
// open for reading and for writing (Opens); who looked up each FIFO,
// socket and device node (Objects); and who wrote through a handle
// (WriterSet).
//
// # Invariants
//
//   - Each type owns its state behind its own lock; none calls another
//     room of the guard. Nothing here decides or labels.
//   - A process is known by (tgid, start time), never by pid alone: a
//     reused pid is another process.
//   - Memory is bounded: reads, lookers and writer resolutions are capped
//     and forgotten with the processes that made them, and with the
//     sessions the registry retires (Reads.Forget).
package tracking
