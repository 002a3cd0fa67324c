import Glibc

/// A thread's wait on one file descriptor that another thread can end for good: `poll` on the
/// descriptor and on the read end of a pipe whose write end `stop` closes. Used by the kernel
/// watches (`NetlinkSocket`, `FileWatch`), whose threads sleep here until the kernel speaks.
package final class WakeablePoll: Sendable {
    package let descriptor: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32

    /// Takes ownership of `descriptor` (closed when the wait ends for good); nil if no pipe can be made.
    package init?(owning descriptor: Int32) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else {
            close(descriptor)
            return nil
        }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        self.descriptor = descriptor
        wakeRead = ends[0]
        wakeWrite = ends[1]
    }

    /// Sleeps until the descriptor is readable (true) or `stop` was called (false; both
    /// descriptors are closed then, and every later call returns false at once).
    package func waitUntilReadable() -> Bool {
        var fds = [
            pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            let ready = poll(&fds, 2, -1)
            if ready < 0 && errno == EINTR { continue }
            if ready > 0, fds[1].revents == 0, fds[0].revents & Int16(POLLIN) != 0 { return true }
            break
        }
        close(descriptor)
        close(wakeRead)
        return false
    }

    /// Whether more is readable right now, without waiting.
    package func hasMore() -> Bool {
        var more = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&more, 1, 0) > 0
    }

    /// Ends the wait for good.
    package func stop() { close(wakeWrite) }
}
