import Glibc

/// Tells when files in a directory change, through inotify: the only file that talks to it. A
/// thread of its own sleeps in `poll` until the kernel reports a change, so watching costs no
/// wakeups while nothing happens.
///
/// `ReplicaChangeWatch` watches a data directory this way: every commit to the replica in WAL
/// mode writes its `-wal` file.
package final class FileWatch: Sendable {
    private let wait: WakeablePoll

    private init(wait: WakeablePoll) { self.wait = wait }

    /// Watches `directory` for files modified or created in it; nil where inotify is not available.
    package static func directory(_ directory: String) -> FileWatch? {
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        guard inotify_add_watch(fd, directory, UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO)) >= 0 else {
            close(fd)
            return nil
        }
        return WakeablePoll(owning: fd).map(FileWatch.init(wait:))
    }

    /// Sleeps until something changed, reads every event waiting, and returns the names of the
    /// files they concern. Nil once stopped.
    package func waitForChanges() -> Set<String>? {
        guard wait.waitUntilReadable() else { return nil }
        var names = Set<String>()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        repeat {
            let count = read(wait.descriptor, &buffer, buffer.count)
            guard count > 0 else { break }
            names.formUnion(Self.names(in: buffer[..<count]))
        } while wait.hasMore()
        return names
    }

    /// The file names in a buffer of `struct inotify_event`s: wd (4) · mask (4) · cookie (4) ·
    /// len (4) · name (len bytes, NUL-padded), integers in the machine's (little-endian) order.
    package static func names(in events: ArraySlice<UInt8>) -> [String] {
        var names: [String] = []
        var offset = events.startIndex
        while offset + 16 <= events.endIndex {
            let length =
                Int(events[offset + 12]) | Int(events[offset + 13]) << 8 | Int(events[offset + 14]) << 16
                | Int(events[offset + 15]) << 24
            let start = offset + 16
            let end = min(start + length, events.endIndex)
            let name = events[start..<end].prefix { $0 != 0 }
            if !name.isEmpty { names.append(String(decoding: name, as: UTF8.self)) }
            offset = start + length
        }
        return names
    }

    /// Wakes the waiting thread for good.
    package func stop() { wait.stop() }
}
