import Foundation
package import Hummingbird
package import LANSync

/// An error as the API answers it: an HTTP status and a JSON body
/// `{"error": {"code": "…", "message": "…"}}` whose message says what to do.
package struct APIError: HTTPResponseError, Sendable {
    package let status: HTTPResponse.Status
    /// A stable, machine-readable name (documented in docs/openapi.json).
    package let code: String
    package let message: String
    /// Seconds to wait before trying again (a `Retry-After` header), for a server at its bounds.
    package var retryAfter: Int?

    package init(_ status: HTTPResponse.Status, _ code: String, _ message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// A node's error: bad input is the client's to fix (400), a schema or SQL problem too (422),
    /// anything else is this node's (500, or 409 for a peer's clock).
    package init(_ error: LANSyncError) {
        let status: HTTPResponse.Status =
            switch error.code {
            case .invalidInput: .badRequest
            case .schema, .sql: .unprocessableContent
            case .notInitialized, .clockSkew: .conflict
            default: .internalServerError
            }
        self.init(status, error.code.name, error.message)
    }

    package var json: String {
        "{\"error\":" + ExportFile.object([("code", ExportFile.quoted(code)), ("message", ExportFile.quoted(message))])
            + "}"
    }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer realm=\"lansync\"" }
        if let retryAfter { headers[.retryAfter] = "\(retryAfter)" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: json + "\n")))
    }
}
