"""Tiny randomly initialised Hugging Face models, built and saved by tests.

No weights are downloaded: the vocabulary is a few hundred characters and
the weights are random, so outputs are meaningless but deterministic for a
seed, which is all the code paths under test need.
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Sequence

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CHARS = list("的一是不了在人有我他这个们中来上大为和国地到以说时要就出会可也你对生能而子那得于着下自之年过发后作里用道行所然家种事成方多经么去法学如都同现当没动面起看定天分还进好小部其些主样理心她本前开但因只从想实日军者意无力它与长把机十民第公此已工使情明性知全三又关点正业外将两高间由问很最重并物手应战向头文体政美相见被利什二等产或新己制身果加西斯月话合回特代内信表化老给世位次度门任常先海通教儿原东声提立及比员解水名真论处走义各入几口认条平系气题活尔更别打女变四神总何电数安少报才结反受目太量再感建务做接必场件计管期市直德资命山金指克许统区保至队形社便空决治展马科司五基眼书非则听白却界达光放强即像难且权思王象完设式色路记南品住告类求据程北边死张该交规万取拉格望觉术领共确传师观清今切院让识候带导争运笑飞风步改收根干造言联持组每济车亲极林服快办议往元英士证近失转夫令准布始怎呢存未远叫台单影具罗字爱击流备兵连调深商算质团集百需价花党华城石级整府离况亚请技际约示复病息究线似官火断精满支视消越器容照须九增研写称企八功吗包片史委乎查轻易早曾除农找装广显吧阿李标谈吃图念六引历首医局突专费号尽另周较注语仅考落青随选列武红响虽推势参希古众构房半节土投某案黑维革划敌致陈律足态护七兴派孩验责营星够章音跟志底站严巴例防族供效续施留讲型料终答紧黄绝奇察母京段依批群项故按河米围江织害斗双境客纪采举杀攻父苏密低朝友诉止细愿千值仍男钱破网热助倒育属坐帝限船脸职速刻乐否刚威毛状率甚独球般普怕弹校苦创假久错承印晚兰试股拿脑预谁益阳若哪微尼继送急血惊伤素药适波夜省初喜卫源食险待述陆习置居劳财环排福纳欢雷警获模充负云停木游龙树疑层冷洲冲射略范竟句室异激汉村哈策演简卡罪判担州静退既衣您宗积余痛检差富灵协角占配征修皮挥胜降阶审沉坚善妈刘读啊超免压银买皇养伊怀执副乱抗犯追帮宣佛岁航优怪香著田铁控税左右份穷故蝴蝶月亮船像小鸟")


def write_vocab(folder: Path) -> Path:
    seen = dict.fromkeys(SPECIAL + CHARS)
    path = folder / "vocab.txt"
    path.write_text("\n".join(seen) + "\n", encoding="utf8")
    return path


def tiny_classifier(folder: Path, labels: Sequence[str], seed: int = 0) -> Path:
    """A BERT sequence classifier with ``labels`` saved to ``folder``."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tok = BertTokenizer(str(write_vocab(folder)), tokenize_chinese_chars=True)
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128,
        id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)},
    )
    BertForSequenceClassification(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def tiny_encoder(folder: Path, seed: int = 0) -> Path:
    """A 2-layer BERT encoder (for BERTScore) saved to ``folder``."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    tok = BertTokenizer(str(write_vocab(folder)), tokenize_chinese_chars=True)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def tiny_causal_lm(folder: Path, seed: int = 0) -> Path:
    """A 2-layer GPT-2 style causal LM with a character BERT tokenizer."""
    import torch
    from transformers import BertTokenizer, GPT2Config, GPT2LMHeadModel

    folder.mkdir(parents=True, exist_ok=True)
    tok = BertTokenizer(str(write_vocab(folder)), tokenize_chinese_chars=True)
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=tok.vocab_size, n_positions=128, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
    GPT2LMHeadModel(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
