// The generated data of bench/inject-compare.mjs and bench/inject-profile.mjs: facts over
// English and Chinese word lists (bench/inject.mjs's generator, with createdAt spread over a
// month) and 16 three-message conversations over the same words, used in turn.
function prng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const EN =
  "writes go rust python services kafka postgres redis cache latency team lead startup berlin shanghai climbing bouldering bread sourdough coffee espresso cat rabbit garden running marathon piano guitar reading novels japanese chinese english spanish travel hiking camera film design figma typescript react vue kubernetes docker terraform budget salary mortgage daughter son wife husband doctor nurse teacher student exam thesis biology chemistry data pipeline spark airflow dashboard metrics backend frontend mobile android ios swift kotlin".split(
    " ",
  );
const ZH =
  "喜欢 不吃 正在 学习 工作 公司 项目 使用 数据 分析 缓存 服务 周末 跑步 爬山 烤面包 咖啡 兔子 猫 女儿 儿子 考试 论文 生物 化学 前端 后端 架构 性能 延迟 团队 上海 杭州 成都 北京 火锅 素食 旅行 摄影 钢琴 吉他 小说 日语 英语 预算 房贷 医生 护士 老师".split(
    " ",
  );
const CATS = ["preference", "knowledge", "context", "behavior", "goal"];

export function makeFacts(n, seed = 42) {
  const r = prng(seed);
  const pick = (arr) => arr[Math.floor(r() * arr.length)];
  const facts = [];
  for (let i = 0; i < n; i++) {
    const words = 4 + Math.floor(r() * 9);
    const kind = r();
    let content;
    if (kind < 0.45) content = Array.from({ length: words }, () => pick(EN)).join(" ");
    else if (kind < 0.8) content = Array.from({ length: Math.ceil(words / 2) }, () => pick(ZH)).join("");
    else content = `${Array.from({ length: 3 }, () => pick(ZH)).join("")} ${pick(EN)} ${pick(EN)}${pick(ZH)}`;
    const day = 1 + Math.floor(r() * 28);
    facts.push({
      id: `fact_${i.toString(16).padStart(8, "0")}`,
      content: `${content} ${i}`,
      category: pick(CATS),
      confidence: Math.round((0.5 + r() * 0.5) * 100) / 100,
      createdAt: `2026-01-${String(day).padStart(2, "0")}T00:00:00Z`,
      source: "bench",
    });
  }
  return facts;
}

/** 16 three-message conversations, mixed English and Chinese, from the same words as the facts. */
export function makeQueries(seed = 7) {
  const r = prng(seed);
  const pick = (arr) => arr[Math.floor(r() * arr.length)];
  const words = (k) => Array.from({ length: k }, () => pick(EN)).join(" ");
  const zh = (k) => Array.from({ length: k }, () => pick(ZH)).join("");
  return Array.from({ length: 16 }, () => [
    { role: "user", content: `我想优化 ${pick(EN)} ${zh(2)}，${zh(2)}` },
    { role: "assistant", content: `可以先看 ${words(2)} 的${zh(2)}。` },
    { role: "user", content: `Also my ${words(3)}, and I am into ${words(2)} in ${pick(EN)}` },
  ]);
}
export const QUERIES = makeQueries();

export function document(facts) {
  return {
    version: "1.0",
    lastUpdated: "",
    facts,
    user: { workContext: { summary: "Backend engineer in Shanghai.", updatedAt: "" } },
    history: {},
  };
}
