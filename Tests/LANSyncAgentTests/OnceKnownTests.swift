import LANSyncTestSupport
import Testing

@testable import LANSyncAgent

/// `OnceKnown`, behind `Agent.listeningPort()` and `LocalAPI.port()`: every wait ends, with the
/// value, its failure, or the waiting task's cancellation. A wait that cannot end hangs its test,
/// so each has a time limit: a generous one, because on a loaded machine a test's time includes
/// minutes of waiting for the cooperative pool that every test of the run shares.
@Suite(.timeLimit(.minutes(10))) struct OnceKnownTests {
    @Test func waitsBeforeAndAfterTheValueIsSettledGetItAndOnlyTheFirstSettlingCounts() async throws {
        let port = OnceKnown<Int>()
        let early = (0..<3).map { _ in Task { try await port.wait() } }
        #expect(port.value == nil)
        port.settle(.success(7001))
        port.settle(.success(9))
        for wait in early { #expect(try await wait.value == 7001) }
        #expect(try await port.wait() == 7001)
        #expect(port.value == 7001)
    }

    @Test func aFailureReachesEveryWaitAndLaterOnes() async {
        struct Taken: Error {}
        let port = OnceKnown<Int>()
        let early = Task { try await port.wait() }
        port.settle(.failure(Taken()))
        await #expect(throws: Taken.self) { try await early.value }
        await #expect(throws: Taken.self) { try await port.wait() }
        #expect(port.value == nil)
    }

    @Test func aCancelledWaitEndsAtOnceAndTheOthersWaitOn() async throws {
        let port = OnceKnown<Int>()
        let cancelled = Task { try await port.wait() }
        let patient = Task { try await port.wait() }
        // Both are waiting, not only started: the cancellation must reach a wait in progress.
        #expect(await eventually { port.waiting == 2 })
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(port.value == nil, "cancelling a wait settles nothing")
        #expect(port.waiting == 1)
        port.settle(.success(42))
        #expect(try await patient.value == 42)
    }

    @Test func aWaitInATaskAlreadyCancelledEndsAtOnce() async {
        let port = OnceKnown<Int>()
        let wait = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await port.wait()
        }
        await #expect(throws: CancellationError.self) { try await wait.value }
    }
}
