package import Foundation

extension Process {
    /// Starts the process and waits for it to exit without holding a thread. Swift Testing runs
    /// tests on the cooperative pool (two threads on a 2-core machine); a test that blocks one
    /// while a long command runs (the container test takes a minute) starves every async test
    /// running alongside, and their timing goes with it.
    ///
    /// A process still running after `timeLimit` gets SIGTERM, and SIGKILL 5 s later, and this
    /// throws `ProcessTimeLimitExceeded` once it ends: a hung command fails its test instead of
    /// hanging the whole test run (a program that ignored SIGTERM once held CI until its limit).
    package func runUntilExit(timeLimit: Duration = .seconds(600)) async throws -> Int32 {
        let limit = TimeLimit()
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            terminationHandler = { process in
                limit.end()
                continuation.resume(returning: process.terminationStatus)
            }
            do {
                try run()
            } catch {
                terminationHandler = nil
                continuation.resume(throwing: error)
                return
            }
            limit.start(pid: processIdentifier, after: timeLimit)
        }
        if limit.stopped {
            throw ProcessTimeLimitExceeded(
                command: ([executableURL?.path ?? "?"] + (arguments ?? [])).joined(separator: " "),
                timeLimit: timeLimit
            )
        }
        return status
    }

    /// Runs to the end with its standard output and error in files, waiting without holding a
    /// thread (`runUntilExit`): reading a pipe to its end would block one of the cooperative
    /// pool's two threads for as long as the program runs. With `mergingErrors` both go to
    /// `stdout`; standard input is `input`, or nothing; past `timeLimit` the program is stopped
    /// and this throws (see `runUntilExit`). Returns the exit status and what the program printed.
    package func runCapturingOutput(
        input: FileHandle? = nil,
        mergingErrors: Bool = false,
        timeLimit: Duration = .seconds(600)
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let base = NSTemporaryDirectory() + "lansync-test-output-\(UUID().uuidString)"
        let outPath = base + ".out"
        let errPath = base + ".err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let errors = mergingErrors ? output : try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let input = input ?? FileHandle(forReadingAtPath: "/dev/null")
        // Closed here, not when released: a Process run with a termination handler keeps its
        // handles open after it ends (one descriptor per run stayed open). Past about 1,360
        // open descriptors, Foundation's spawn, which lists /proc/self/fd and copies 256 bytes of
        // each name, read beyond its buffer and crashed the test process.
        defer {
            for handle in [output, mergingErrors ? nil : errors, input].compactMap({ $0 }) { try? handle.close() }
        }
        standardOutput = output
        standardError = errors
        standardInput = input
        let status = try await runUntilExit(timeLimit: timeLimit)
        let read = { (path: String) in
            String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self)
        }
        return (status, read(outPath), read(errPath))
    }
}

/// A command a test ran was still running after its time limit, and was stopped.
package struct ProcessTimeLimitExceeded: Error, CustomStringConvertible {
    package let command: String
    package let timeLimit: Duration

    package var description: String {
        "\(command) was still running after \(timeLimit) and was stopped (SIGTERM, then SIGKILL)"
    }
}

/// The time limit of one process run: signals it once the limit passes, unless it ended first.
/// The lock orders `end` (from the termination handler) against the timer, so a process that has
/// ended, whose PID the system may give to another, is never signalled.
private final class TimeLimit: @unchecked Sendable {
    private let lock = NSLock()
    private var ended = false
    private var signalled = false

    /// Whether the limit passed and the process was signalled.
    var stopped: Bool { lock.withLock { signalled } }

    func end() { lock.withLock { ended = true } }

    func start(pid: Int32, after limit: Duration) {
        let (seconds, attoseconds) = limit.components
        let interval = Double(seconds) + Double(attoseconds) / 1e18
        DispatchQueue.global().asyncAfter(deadline: .now() + interval) {
            self.signal(pid, SIGTERM)
            DispatchQueue.global().asyncAfter(deadline: .now() + 5) { self.signal(pid, SIGKILL) }
        }
    }

    private func signal(_ pid: Int32, _ signal: Int32) {
        lock.withLock {
            guard !ended else { return }
            signalled = true
            kill(pid, signal)
        }
    }
}
