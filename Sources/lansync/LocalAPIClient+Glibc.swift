import Foundation
import Glibc

/// One HTTP request to the running agent's local API over its Unix socket (`api.sock` in the
/// data directory, owner only): what `lansync dashboard` needs, without an HTTP client library.
enum LocalAPIClient {
    struct Failure: Error { let message: String }

    /// Sends `method path` to the API serving `dataDirectory` with a token (by default that
    /// directory's `api-token`); returns the status and the body.
    static func request(
        _ method: String,
        _ path: String,
        dataDirectory: String,
        tokenFile: String? = nil
    ) throws -> (status: Int, body: String) {
        guard let token = try? String(contentsOfFile: tokenFile ?? dataDirectory + "/api-token", encoding: .utf8) else {
            throw Failure(
                message: "no API token in \(dataDirectory); is the agent running? Start it with `lansync run`"
            )
        }
        let socketPath = dataDirectory + "/api.sock"
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else {
            throw Failure(message: "cannot make a socket: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(socketPath.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw Failure(message: "the data directory's path is too long for its API socket; use a shorter --data-dir")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in pathBytes.enumerated() { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            throw Failure(
                message:
                    "the agent's local API does not answer at \(socketPath); start the agent with `lansync run` (without --no-api)"
            )
        }
        let request =
            "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(token.trimmingCharacters(in: .whitespacesAndNewlines))\r\n"
            + "Content-Length: 0\r\nConnection: close\r\n\r\n"
        let bytes = Array(request.utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else {
            throw Failure(message: "cannot send to the agent's local API")
        }
        var response = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count <= 0 { break }
            response += buffer[0..<count]
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let statusLine = text.split(separator: "\r\n").first,
            let status = Int(statusLine.split(separator: " ").dropFirst().first ?? ""),
            let bodyStart = text.range(of: "\r\n\r\n")
        else { throw Failure(message: "the agent's local API gave an answer that is not HTTP") }
        // The agent answers with a Content-Length and closes (`Connection: close`): the rest is the body.
        let body = String(text[bodyStart.upperBound...])
        return (status, body)
    }
}
