import Foundation

/// Polls until `condition` holds or `seconds` pass; returns whether it held. Sleeps 50 ms between
/// polls without holding a thread, so a test waits for a condition rather than a fixed time and
/// other tests run meanwhile.
package func eventually(within seconds: Double = 30, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return try await condition()
}
