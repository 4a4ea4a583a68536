// The labs' checkpoint quizzes, interactive on the static site: what the notebook's widget does, in the browser.
//
// Each lab page holds its quiz as answer-free HTML (div.streamlab-quiz: the questions and their choices, what a
// notebook shows before it runs). This script replaces it with buttons: a click on an answer says "Right." or
// "Not quite." with that answer's feedback (and, once right, why), a numeric question is checked from its box,
// and "Show all answers" shows every answer only when the reader asks. The texts come from _static/quiz-NN.js,
// written at build time by streamlab.tools.quizview.site_quiz (the same functions the widget uses), loaded with
// a <script> tag so the site also works opened from the disk (file://). Without JavaScript the HTML stays.
// What tells a right answer from a wrong one is sealed in those files (site_quiz's `seal`: JSON XORed with a
// keystream drawn from a key, in base64), so a reader of the page's source sees no answer; `unseal` opens one
// when the reader clicks, checks a number or asks for the answers.
"use strict";
(() => {
  const base = document.currentScript.src.replace(/[^/]*$/, "");
  window.streamlabQuizzes = window.streamlabQuizzes || {};

  const el = (tag, cls, html) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (html !== undefined) node.innerHTML = html;
    return node;
  };

  // A learner's number, as streamlab.tools.quiz.parse_number reads it: a decimal, or a fraction such as 1/30.
  const parseNumber = (typed) => {
    const text = typed.trim().replace(/ /g, "");
    const one = (s) => (/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(s) ? Number(s) : NaN);
    const parts = text.split("/");
    const value = parts.length === 2 ? one(parts[0]) / one(parts[1]) : parts.length === 1 ? one(text) : NaN;
    return Number.isFinite(value) ? value : null;
  };

  // streamlab.tools.quizview._keystream: FNV-1a of the key's UTF-8 bytes seeds mulberry32, 4 bytes a word.
  const keystream = (key) => {
    let state = 0x811c9dc5;
    for (const byte of new TextEncoder().encode(key)) state = Math.imul(state ^ byte, 0x01000193) >>> 0;
    return () => {
      state = (state + 0x6d2b79f5) >>> 0;
      let word = Math.imul(state ^ (state >>> 15), state | 1);
      word = (word + Math.imul(word ^ (word >>> 7), word | 61)) ^ word;
      return (word ^ (word >>> 14)) >>> 0;
    };
  };

  const unseal = (sealed, key) => {
    const bytes = Uint8Array.from(atob(sealed), (c) => c.charCodeAt(0));
    const next = keystream(key);
    let word = 0;
    for (let i = 0; i < bytes.length; i++) {
      if (i % 4 === 0) word = next();
      bytes[i] ^= (word >>> (8 * (i % 4))) & 0xff;
    }
    return JSON.parse(new TextDecoder().decode(bytes));
  };

  const close = (a, b) => Math.abs(a - b) <= Math.max(1e-9 * Math.max(Math.abs(a), Math.abs(b)), 1e-12);

  // The verdict HTML for a typed answer: the first entry that matches decides (jupyterquiz's rule).
  const gradeNumber = (graded, typed) => {
    const number = parseNumber(typed);
    if (number === null) {
      return {correct: false, html: "<b>Not quite.</b> That is not a number: type digits, such as 0.25 or 1/30."};
    }
    for (const entry of graded.numeric) {
      const hit = entry.kind === "value" ? close(number, entry.value) : entry.low <= number && number < entry.high;
      if (hit) return {correct: entry.correct, html: entry.verdict};
    }
    return {correct: false, html: graded.default};
  };

  function render(holder, quiz) {
    const right = new Set();
    const box = el("div", "streamlab-quiz streamlab-quiz-live");
    box.dataset.lab = quiz.lab;
    box.appendChild(el("h4", "", quiz.title));
    const score = el("p", "streamlab-quiz-score");
    const update = () => {
      score.innerHTML = `<i>Answered right so far: ${right.size} of ${quiz.questions.length}.</i>`;
    };
    quiz.questions.forEach((question, k) => {
      const part = el("div", "streamlab-quiz-question");
      part.dataset.question = question.id;
      part.appendChild(el("p", "", `<b>${k + 1}. ${question.html}</b>`));
      if (question.code) part.appendChild(el("div", "", question.code));
      const feedback = el("div", "streamlab-quiz-feedback");
      feedback.setAttribute("aria-live", "polite");
      const show = (verdict, control) => {
        feedback.innerHTML = verdict.html;
        control.classList.remove("right", "wrong");
        control.classList.add(verdict.correct ? "right" : "wrong");
        if (verdict.correct) right.add(k);
        update();
      };
      if (question.kind === "multiple_choice") {
        question.choices.forEach((choice) => {
          const row = el("div", "streamlab-quiz-choice");
          const button = el("button", "", choice.letter);
          button.type = "button";
          button.title = `answer ${choice.letter}`;
          button.addEventListener("click", () => {
            const sealed = unseal(choice.seal, `${quiz.salt}:${question.id}:${choice.letter}`);
            show({correct: sealed.correct, html: sealed.verdict}, button);
          });
          row.appendChild(button);
          row.appendChild(el("span", "", choice.html));
          part.appendChild(row);
        });
      } else {
        const row = el("div", "streamlab-quiz-choice");
        const entry = el("input");
        entry.type = "text";
        entry.placeholder = "a number";
        const check = el("button", "", "Check");
        check.type = "button";
        const grade = () =>
          entry.value.trim() &&
          show(gradeNumber(unseal(question.seal, `${quiz.salt}:${question.id}:numeric`), entry.value), check);
        check.addEventListener("click", grade);
        entry.addEventListener("keydown", (e) => e.key === "Enter" && grade());
        row.appendChild(entry);
        row.appendChild(check);
        part.appendChild(row);
      }
      part.appendChild(feedback);
      box.appendChild(part);
    });
    update();
    box.appendChild(score);
    const reveal = el("button", "streamlab-quiz-reveal", "Show all answers");
    reveal.type = "button";
    const answers = el("div", "streamlab-quiz-answers");
    reveal.addEventListener("click", () => {
      const shown = answers.innerHTML !== "";
      answers.innerHTML = shown ? "" : unseal(quiz.answers_seal, `${quiz.salt}:answers`);
      reveal.textContent = shown ? "Show all answers" : "Hide the answers";
    });
    box.appendChild(reveal);
    box.appendChild(answers);
    holder.replaceWith(box);
  }

  window.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("div.streamlab-quiz:not(.streamlab-quiz-live)").forEach((holder) => {
      const title = holder.querySelector("h4");
      const lab = title && /lab (\d\d):/.exec(title.textContent);
      if (!lab) return;
      const script = document.createElement("script");
      script.src = `${base}quiz-${lab[1]}.js`;
      script.addEventListener("load", () => render(holder, window.streamlabQuizzes[lab[1]]));
      document.head.appendChild(script);
    });
  });
})();
