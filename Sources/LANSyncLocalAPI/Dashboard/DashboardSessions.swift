import Foundation
import Synchronization

/// Who may see the dashboard: one-time login codes (what `lansync dashboard` prints, in a link)
/// and the browser sessions they open. A code works once, for five minutes; a session lasts
/// twelve hours and lives only in the agent's memory (a restart asks for a new link).
package final class DashboardSessions: Sendable {
    package static let codeLifetime: Int64 = 5 * 60 * 1000
    package static let sessionLifetime: Int64 = 12 * 3600 * 1000
    package static let cookieName = "lansync_session"

    /// Each code's and session's expiry, and the groups it opens (nil: every group of the node).
    private let state = Mutex<
        (
            codes: [String: (expires: Int64, scope: Set<String>?)],
            sessions: [String: (expires: Int64, scope: Set<String>?)]
        )
    >(([:], [:]))
    private let now: @Sendable () -> Int64

    package init(now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }) {
        self.now = now
    }

    /// A new one-time code and when it expires; its session opens the groups `scope` names
    /// (nil: every group of the node, for a link made with the node's token).
    package func newCode(scope: Set<String>? = nil) -> (code: String, expires: Int64) {
        let code = Self.random()
        let expires = now() + Self.codeLifetime
        state.withLock { state in
            let current = now()
            state.codes = state.codes.filter { $0.value.expires > current }
            state.codes[code] = (expires, scope)
        }
        return (code, expires)
    }

    /// Spends `code`: a new session's ID, or nil when the code is unknown, used or expired.
    package func redeem(_ code: String) -> String? {
        state.withLock { state in
            guard let held = state.codes.removeValue(forKey: code), held.expires > now() else { return nil }
            let session = Self.random()
            state.sessions = state.sessions.filter { $0.value.expires > now() }
            state.sessions[session] = (now() + Self.sessionLifetime, held.scope)
            return session
        }
    }

    package func isValid(session: String) -> Bool {
        state.withLock { state in (state.sessions[session]?.expires ?? 0) > now() }
    }

    /// Whether a valid `session` may see `group`'s pages.
    package func allows(_ session: String, group: String) -> Bool {
        state.withLock { state in
            guard let held = state.sessions[session], held.expires > now() else { return false }
            return held.scope?.contains(group) ?? true
        }
    }

    /// The groups a valid session opens (nil: every group), or an empty set for no valid session.
    package func scope(of session: String) -> Set<String>? {
        state.withLock { state in
            guard let held = state.sessions[session], held.expires > now() else { return [] }
            return held.scope
        }
    }

    /// The session named by a request's `Cookie` header, when valid.
    package func session(inCookies header: String?) -> String? {
        guard let header else { return nil }
        for part in header.split(separator: ";") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if pair.count == 2, pair[0] == Self.cookieName, isValid(session: pair[1]) { return pair[1] }
        }
        return nil
    }

    private static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }
}
