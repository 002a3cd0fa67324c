import Foundation
import Hummingbird
import LANSyncAgent

/// What every request passes before any route sees it, API or dashboard:
/// - the `Host` header names this machine's loopback (`localhost`, `127.0.0.1`, `[::1]`, with any
///   port), so a web page that rebinds its own name to 127.0.0.1 (DNS rebinding) is refused;
/// - an `Origin` header, which browsers send on cross-site requests, is a loopback origin too,
///   so another site's page cannot make a browser call the API.
struct LoopbackGuard<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if let host = request.head.authority, !Self.isLoopback(host: host) {
            throw APIError(
                .misdirectedRequest,
                "host_not_allowed",
                "the local API answers only requests addressed to localhost, 127.0.0.1 or [::1], not '\(host)'"
            )
        }
        if let origin = request.headers[.origin], !Self.isLoopback(origin: origin) {
            throw APIError(
                .forbidden,
                "origin_not_allowed",
                "requests from pages of '\(origin)' are refused; the API serves local programs"
            )
        }
        return try await next(request, context)
    }

    /// A Host header naming loopback (`PeerAddress.isLoopback`), with or without a port.
    static func isLoopback(host: String) -> Bool {
        var name = Substring(host)
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            let rest = name[name.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && rest.dropFirst().allSatisfy(\.isNumber)) else { return false }
            name = name[name.index(after: name.startIndex)..<close]
        } else if let colon = name.lastIndex(of: ":") {
            guard name[name.index(after: colon)...].allSatisfy(\.isNumber) else { return false }
            name = name[..<colon]
        }
        return PeerAddress.isLoopback(host: String(name))
    }

    static func isLoopback(origin: String) -> Bool {
        for scheme in ["http://", "https://"] where origin.lowercased().hasPrefix(scheme) {
            return isLoopback(host: String(origin.dropFirst(scheme.count)))
        }
        return false
    }
}

/// The API's routes want the token, as `Authorization: Bearer TOKEN` or `X-API-Key: TOKEN`. A
/// browser cannot add either header to a cross-site request without CORS, which the API does
/// not answer: that is the CSRF protection. (The dashboard's pages want a session instead.)
struct TokenGuard<Context: RequestContext>: RouterMiddleware {
    let token: APIToken
    /// The node's token, which opens every group's routes too.
    var nodeToken: APIToken? = nil

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let given = try Self.given(request)
        guard token.matches(given) || nodeToken?.matches(given) == true else {
            throw APIError(.unauthorized, "token_wrong", "the token does not match the data directory's api-token file")
        }
        return try await next(request, context)
    }

    /// The token a request carries (`Authorization: Bearer` or `X-API-Key`), or 401 when none.
    static func given(_ request: Request) throws -> String {
        let given: Substring? =
            if let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer ") {
                authorization.dropFirst(7)
            } else {
                request.headers[.init("X-API-Key")!].map { Substring($0) }
            }
        guard let given else {
            throw APIError(
                .unauthorized,
                "token_required",
                "send the token from the data directory's api-token file as 'Authorization: Bearer TOKEN' or 'X-API-Key: TOKEN'"
            )
        }
        return given.trimmingCharacters(in: .whitespaces)
    }
}

/// A group's routes (`/v1/groups/{group}/…`) behind that group's own token (`api-token` in its
/// data directory): a token of one group opens no other. A group that does not exist gets the
/// answer a wrong token gets, so a token tells its holder nothing of the node's other groups.
struct GroupTokenGuard<Context: RequestContext>: RouterMiddleware {
    let tokens: [String: APIToken]
    /// The node's token, which opens every group.
    var nodeToken: APIToken? = nil

    static var wrong: APIError {
        APIError(.unauthorized, "token_wrong", "the token does not match the api-token file of the group in the path")
    }

    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let given = try TokenGuard<Context>.given(request)
        guard let name = context.parameters.get("group"), let token = tokens[name],
            token.matches(given) || nodeToken?.matches(given) == true
        else {
            throw Self.wrong
        }
        return try await next(request, context)
    }
}

/// Answers a path no route serves with the API's JSON error, not an empty body: a client that
/// reads `error.message` learns what went wrong.
struct UnknownRouteAsJSON<Context: RequestContext>: RouterMiddleware {
    func handle(
        _ request: Request,
        context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            // Hummingbird answers a known path with another method with 404 too.
            throw APIError(
                .notFound,
                "no_route",
                "\(request.method) \(request.uri.path) is not a route of the local API; docs/openapi.json lists them"
            )
        }
    }
}
