import Glibc

/// Says that an agent serves a group's data directory: a shared `flock` on the directory, held
/// from the agent's start until its last part stopped (the peer list written, the replica quiet).
/// Erasing the group takes the lock exclusively, so it never deletes files an agent is still
/// writing, also in the moment between a restarting agent's control socket closing and its
/// process starting again. The descriptor is close-on-exec: a process that replaces itself
/// (`lansync run` restarting) lets go.
package final class ServingLock: Sendable {
    private let descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    private static func open(_ directory: DataDirectory) -> Int32? {
        let descriptor = Glibc.open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        return descriptor >= 0 ? descriptor : nil
    }

    /// Takes the shared lock for an agent serving `directory`; nil when the directory cannot be opened.
    package static func serve(_ directory: DataDirectory) -> ServingLock? {
        guard let descriptor = open(directory) else { return nil }
        guard flock(descriptor, LOCK_SH) == 0 else {
            close(descriptor)
            return nil
        }
        return ServingLock(descriptor: descriptor)
    }

    /// Takes the lock exclusively, for erasing: nil when an agent still holds it after `seconds`.
    package static func exclusive(_ directory: DataDirectory, waiting seconds: Double) async -> ServingLock? {
        guard let descriptor = open(directory) else { return nil }
        let deadline = ContinuousClock.now + .seconds(seconds)
        while flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, ContinuousClock.now < deadline else {
                close(descriptor)
                return nil
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return ServingLock(descriptor: descriptor)
    }

    deinit { close(descriptor) }
}
