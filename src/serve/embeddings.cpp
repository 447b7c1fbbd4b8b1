#include "serve/embeddings.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>

#include "serve/json_reply.h"
#include "serve/request_json.h"

namespace minfer::serve {

using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;
using Input = EmbeddingRequest::Input;

// An input that cannot fit a sequence's context: llama-server's
// exceed_context_size_error, its numbers as fields.
struct TooLong {
  size_t index = 0;
  int64_t n_tokens = 0;
  bool at_least = false;
};

Result<Input> token_input(const json& ids, const std::string& where, int64_t n_vocab) {
  Input in;
  in.is_tokens = true;
  for (const json& t : ids) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= n_vocab) {
      return Status::invalid_argument(where + ": token ids must be integers in [0, " +
                                      std::to_string(n_vocab) + ")");
    }
    in.tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  if (in.tokens.empty()) return Status::invalid_argument(where + " has no tokens");
  return in;
}

Result<Input> one_input(const json& v, const std::string& where, int64_t n_vocab) {
  if (v.is_string()) {
    Input in;
    in.text = v.get<std::string>();
    if (in.text.empty()) return Status::invalid_argument(where + " is an empty string");
    return in;
  }
  if (v.is_array()) return token_input(v, where, n_vocab);
  return Status::invalid_argument(where + " must be a string or a list of token ids");
}

bool all_numbers(const json& list) {
  return std::all_of(list.begin(), list.end(), [](const json& x) { return x.is_number(); });
}

Status parse_options(const json& body, EmbeddingRequest& r) {
  if (const auto f = body.find("encoding_format"); f != body.end()) {
    if (!f->is_string() || (*f != "float" && *f != "base64")) {
      return Status::invalid_argument("'encoding_format' must be \"float\" or \"base64\"");
    }
    r.base64 = *f == "base64";
  }
  if (const auto n = body.find("embd_normalize"); n != body.end()) {
    if (!n->is_number_integer() || n->get<int64_t>() < -1 || n->get<int64_t>() > 64) {
      return Status::invalid_argument("'embd_normalize' must be an integer from -1 to 64");
    }
    r.normalize = static_cast<int>(n->get<int64_t>());
  }
  if (const auto m = body.find("model"); m != body.end() && m->is_string()) r.model = *m;
  return Status::ok();
}

}  // namespace

Result<EmbeddingRequest> parse_embedding_request(const json& body, int64_t n_vocab) {
  EmbeddingRequest r;
  auto field = body.find("input");
  if (field == body.end()) {
    field = body.find("content");
    r.native = field != body.end();
  }
  if (field == body.end())
    return Status::invalid_argument("\"input\" or \"content\" must be provided");
  const std::string name = r.native ? "'content'" : "'input'";
  const json& v = *field;
  if (v.is_array() && v.empty()) return Status::invalid_argument(name + " must not be empty");
  if (v.is_string() || (v.is_array() && all_numbers(v))) {
    MINFER_ASSIGN_OR_RETURN(Input in, one_input(v, name, n_vocab));
    r.inputs.push_back(std::move(in));
  } else if (v.is_array()) {
    if (v.size() > EmbeddingRequest::kMaxInputs) {
      return Status::invalid_argument(name + " has " + std::to_string(v.size()) +
                                      " inputs, at most " +
                                      std::to_string(EmbeddingRequest::kMaxInputs));
    }
    for (size_t i = 0; i < v.size(); ++i) {
      MINFER_ASSIGN_OR_RETURN(Input in,
                              one_input(v[i], name + "[" + std::to_string(i) + "]", n_vocab));
      r.inputs.push_back(std::move(in));
    }
  } else {
    return Status::invalid_argument(name +
                                    " must be a string, a list of token ids, or a list of those");
  }
  MINFER_RETURN_IF_ERROR(parse_options(body, r));
  return r;
}

namespace {

json not_enabled_json() {
  return {{"error",
           {{"code", 501},
            {"message", "This server does not support embeddings. Start it with `--embeddings`"},
            {"type", "not_supported_error"}}}};
}

json too_long_json(const TooLong& t, int64_t n_ctx) {
  const std::string n = (t.at_least ? "at least " : "") + std::to_string(t.n_tokens);
  return {{"error",
           {{"code", 400},
            {"message", "input " + std::to_string(t.index) + " (" + n +
                            " tokens) is larger than the max context size (" +
                            std::to_string(n_ctx) + " tokens)"},
            {"type", "exceed_context_size_error"},
            {"n_prompt_tokens", t.n_tokens},
            {"n_ctx", n_ctx}}}};
}

// Every input's tokens, or the first that cannot fit the context (a text
// that cannot is refused before it is tokenized).
Result<std::vector<std::vector<int32_t>>> tokenize_all(const EmbeddingContext& ctx,
                                                       const EmbeddingRequest& r,
                                                       TooLong& too_long) {
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const Input& in = r.inputs[i];
    if (!in.is_tokens) {
      if (const int64_t least = ctx.formatter->min_tokens(in.text); least > ctx.n_ctx) {
        too_long = {i, least, true};
        return Status::out_of_range("input too long");
      }
    }
    std::vector<int32_t> ids = in.tokens;
    if (!in.is_tokens) {
      MINFER_ASSIGN_OR_RETURN(ids, runtime::encode_prompt(ctx.model->tokenizer(), in.text));
    }
    if (static_cast<int64_t>(ids.size()) > ctx.n_ctx) {
      too_long = {i, static_cast<int64_t>(ids.size()), false};
      return Status::out_of_range("input too long");
    }
    out.push_back(std::move(ids));
  }
  return out;
}

// One input on the engine: its pooler (which the engine thread fills
// through the request's sink) and its channel.
struct Live {
  size_t index;
  std::shared_ptr<runtime::Pooler> pooler;
  std::shared_ptr<Channel> channel;
};

Live submit(const EmbeddingContext& ctx, size_t index, std::vector<int32_t> tokens) {
  auto pooler = std::make_shared<runtime::Pooler>(ctx.pooling, ctx.model->hparams().n_embd,
                                                  static_cast<int64_t>(tokens.size()));
  runtime::Request r;
  r.prompt = std::move(tokens);
  r.max_tokens = 0;
  // The sink holds the pooler: a request abandoned mid-way stays safe.
  r.on_prompt_hidden = [pooler](int64_t first, std::span<const float> rows) {
    return pooler->add(first, rows);
  };
  std::vector<runtime::Request> one;
  one.push_back(std::move(r));
  return {index, pooler, ctx.scheduler->submit(std::move(one))};
}

// Runs every input, at most `window` queued at once, into `out` (per
// input: its vectors). An error ends the rest.
Status run_all(const EmbeddingContext& ctx, std::vector<std::vector<int32_t>> prompts,
               HttpReply& reply, std::vector<std::vector<std::vector<float>>>& out) {
  const size_t window = static_cast<size_t>(std::max<int64_t>(1, 2 * ctx.n_slots));
  const auto deadline = Clock::now() + std::chrono::seconds(ctx.timeout_s);
  out.assign(prompts.size(), {});
  std::vector<Live> live;
  const auto fail = [&](Status s) {
    for (Live& l : live) l.channel->cancel();
    return s;
  };
  size_t next = 0, done = 0;
  std::vector<Channel::Item> items;
  while (done < prompts.size()) {
    while (live.size() < window && next < prompts.size()) {
      live.push_back(submit(ctx, next, std::move(prompts[next])));
      ++next;
    }
    live.front().channel->wait(items, 50);  // inputs tend to end in the order they started
    for (auto it = live.begin(); it != live.end();) {
      while (it->channel->wait(items, 0) && !items.empty()) {
      }
      if (!it->channel->done()) {
        ++it;
        continue;
      }
      if (Status s = it->channel->status(); !s) return fail(s);
      out[it->index] = it->pooler->result();
      if (out[it->index].empty()) {
        return fail(Status::unavailable("input " + std::to_string(it->index) +
                                        " ended before its embedding was computed"));
      }
      ++done;
      it = live.erase(it);
    }
    if (reply.client_gone()) return fail(Status::unavailable("the client went away"));
    if (Clock::now() > deadline && done < prompts.size()) {
      return fail(Status::unavailable("the request ran past the server's timeout of " +
                                      std::to_string(ctx.timeout_s) + " s (--timeout)"));
    }
  }
  return Status::ok();
}

std::string base64_of(std::span<const float> v) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<unsigned char> bytes(v.size_bytes());
  std::memcpy(bytes.data(), v.data(), bytes.size());  // little-endian hosts: OpenAI's f32 order
  std::string s;
  s.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = static_cast<uint32_t>(bytes[i]) << 16;
    if (n > 1) w |= static_cast<uint32_t>(bytes[i + 1]) << 8;
    if (n > 2) w |= bytes[i + 2];
    s += kAlphabet[(w >> 18) & 63];
    s += kAlphabet[(w >> 12) & 63];
    s += n > 1 ? kAlphabet[(w >> 6) & 63] : '=';
    s += n > 2 ? kAlphabet[w & 63] : '=';
  }
  return s;
}

json openai_json(const EmbeddingContext& ctx, const EmbeddingRequest& r,
                 const std::vector<std::vector<std::vector<float>>>& vectors, int64_t tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<float>& v = vectors[i].front();
    data.push_back({{"object", "embedding"},
                    {"index", i},
                    {"embedding", r.base64 ? json(base64_of(v)) : json(v)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", r.model.empty() ? ctx.model_id : r.model},
          {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
}

json native_json(const std::vector<std::vector<std::vector<float>>>& vectors) {
  json out = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    out.push_back({{"index", i}, {"embedding", vectors[i]}});
  }
  return out;
}

}  // namespace

void answer_embeddings(const EmbeddingContext& ctx, const HttpRequest& req, bool openai,
                       HttpReply& reply) {
  if (!ctx.enabled) return send_json(reply, 501, not_enabled_json());
  if (openai && ctx.pooling == runtime::Pooling::kNone) {
    return send_error(reply, Status::invalid_argument("Pooling type 'none' is not OAI compatible. "
                                                      "Please use a different pooling type"));
  }
  auto body = parse_request_json(req.body);
  if (!body) return send_error(reply, body.status());
  auto r = parse_embedding_request(*body, ctx.model->hparams().n_vocab);
  if (!r) return send_error(reply, r.status());
  TooLong too_long;
  auto prompts = tokenize_all(ctx, *r, too_long);
  if (!prompts && prompts.status().code() == StatusCode::kOutOfRange) {
    return send_json(reply, 400, too_long_json(too_long, ctx.n_ctx));
  }
  if (!prompts) return send_error(reply, prompts.status());
  int64_t tokens = 0;
  for (const auto& p : *prompts) tokens += static_cast<int64_t>(p.size());
  std::vector<std::vector<std::vector<float>>> vectors;
  const Status run = run_all(ctx, std::move(*prompts), reply, vectors);
  ctx.metrics->request(run.is_ok());
  if (!run) return send_error(reply, run);
  if (ctx.pooling != runtime::Pooling::kNone) {  // llama-server normalizes pooled vectors only
    for (auto& v : vectors) runtime::normalize_embedding(v.front(), r->normalize);
  }
  if (openai && !r->native) return send_json(reply, 200, openai_json(ctx, *r, vectors, tokens));
  send_json(reply, 200, native_json(vectors));
}

}  // namespace minfer::serve
