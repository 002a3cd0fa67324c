import Foundation
import LANSyncTestSupport
import Testing

/// A command a test runs that never ends must fail that test, not hang the whole run: the time
/// limit of `Process.runCapturingOutput` stops it with SIGTERM, then SIGKILL.
struct ProcessTimeLimitTests {
    @Test func aCommandPastItsTimeLimitIsStoppedAndItsTestFails() async throws {
        try await expectStopped("exec sleep 300")
    }

    /// A program that ignores SIGTERM (as one whose signal only stopped part of its work did) is
    /// killed 5 s later.
    @Test func aCommandThatIgnoresSIGTERMIsKilled() async throws {
        try await expectStopped("trap '' TERM; exec sleep 300")
    }

    @Test func aCommandThatEndsInTimeIsNotSignalled() async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "echo done"]
        let (status, printed, _) = try await process.runCapturingOutput(timeLimit: .seconds(60))
        #expect(status == 0 && printed == "done\n")
    }

    private func expectStopped(_ script: String) async throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        let started = ContinuousClock.now
        await #expect(throws: ProcessTimeLimitExceeded.self) {
            try await process.runCapturingOutput(timeLimit: .seconds(1))
        }
        // Well under the command's own 300 s, however busy the machine.
        #expect(ContinuousClock.now - started < .seconds(120))
        #expect(!process.isRunning)
    }
}
