import Glibc

/// Tells when files in a directory change, through inotify: the only file that talks to it. A
/// thread of its own sleeps in `poll` until the kernel reports a change, so watching costs no
/// wakeups while nothing happens.
///
/// The agent watches its data directory this way to learn of writes by other processes (an app
/// embedding LANSync, the CLI, a script) to the replica it serves: every commit in WAL mode
/// writes the `-wal` file. (The CLI also tells the agent over the control socket; this catches
/// every other writer, with no polling.)
final class FileWatch: Sendable {
    private let inotify: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32

    private init(inotify: Int32, wakeRead: Int32, wakeWrite: Int32) {
        self.inotify = inotify
        self.wakeRead = wakeRead
        self.wakeWrite = wakeWrite
    }

    /// Watches `directory` for files modified or created in it; nil where inotify is not available.
    static func directory(_ directory: String) -> FileWatch? {
        let fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        var pipeEnds: [Int32] = [0, 0]
        guard inotify_add_watch(fd, directory, UInt32(IN_MODIFY | IN_CREATE | IN_MOVED_TO)) >= 0, pipe(&pipeEnds) == 0 else {
            close(fd)
            return nil
        }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return FileWatch(inotify: fd, wakeRead: pipeEnds[0], wakeWrite: pipeEnds[1])
    }

    /// Sleeps until something changed, reads every event waiting, and returns the names of the
    /// files they concern. Nil once stopped (the descriptors are closed then).
    func waitForChanges() -> Set<String>? {
        var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        while true {
            let ready = poll(&fds, 2, -1)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0, fds[1].revents == 0, fds[0].revents & Int16(POLLIN) != 0 else { break }
            var names = Set<String>()
            var buffer = [UInt8](repeating: 0, count: 16 * 1024)
            while true {
                let count = read(inotify, &buffer, buffer.count)
                guard count > 0 else { break }
                names.formUnion(Self.names(in: buffer[..<count]))
                // Another read only if more is waiting.
                var more = pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)
                guard poll(&more, 1, 0) > 0 else { break }
            }
            return names
        }
        close(inotify)
        close(wakeRead)
        return nil
    }

    /// The file names in a buffer of `struct inotify_event`s: wd (4) · mask (4) · cookie (4) ·
    /// len (4) · name (len bytes, NUL-padded).
    static func names(in events: ArraySlice<UInt8>) -> [String] {
        var names: [String] = []
        var offset = events.startIndex
        while offset + 16 <= events.endIndex {
            let length = Int(events[offset + 12]) | Int(events[offset + 13]) << 8 | Int(events[offset + 14]) << 16
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
    func stop() { close(wakeWrite) }
}
